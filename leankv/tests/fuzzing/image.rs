//! Valid database images to mutate: built once per process through the public API (big pool,
//! no background writer, one thread: the same bytes every time), then described page by page.

use super::nodes::{self, get_u32, get_u64, parse_node, swip_page};
use super::Pairs;
use leankv::testing::{MemoryStorage, Storage};
use leankv::{Db, Options};
use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

/// The tree name used for the catalog in [`Image::owner`].
pub const CATALOG: &str = "<catalog>";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageKind {
    Superblock,
    Leaf,
    Inner,
    /// A page of the free-list chain.
    FreeListTrunk,
    /// A free page listed in the chain.
    Free,
    /// Referenced by nothing the walk found.
    Unknown,
}

#[derive(Debug, Clone)]
pub struct PageMeta {
    pub kind: PageKind,
    /// The tree a node belongs to.
    pub owner: Option<String>,
    pub level: u16,
    /// Whether it is the root of its tree.
    pub root: bool,
}

pub struct Image {
    pub name: &'static str,
    pub page_size: usize,
    pub bytes: Vec<u8>,
    pub page_count: u64,
    pub catalog_root: u64,
    pub pages: Vec<PageMeta>,
    /// Final content of each tree.
    pub trees: BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>,
    /// Every pair ever written per tree (removed and overwritten ones too), catalog included.
    pub written: BTreeMap<String, Arc<Pairs>>,
    /// Every pair ever written to any tree, plus the pairs of every well-formed leaf.
    pub all: Arc<Pairs>,
    /// Page ids worth pointing at (each kind represented).
    pub interesting: Vec<u64>,
    /// Every key of every tree (for lookups).
    pub keys: Vec<Vec<u8>>,
}

impl Image {
    pub fn pages_of(&self, kind: PageKind) -> Vec<u64> {
        (0..self.pages.len() as u64)
            .filter(|&id| self.pages[id as usize].kind == kind)
            .collect()
    }

    pub fn pages_owned_by(&self, tree: &str) -> Vec<u64> {
        (0..self.pages.len() as u64)
            .filter(|&id| self.pages[id as usize].owner.as_deref() == Some(tree))
            .collect()
    }

    pub fn page(&self, id: u64) -> &[u8] {
        let at = id as usize * self.page_size;
        &self.bytes[at..at + self.page_size]
    }
}

/// Writes made while building, recorded for the oracle.
struct Builder {
    db: Db,
    written: BTreeMap<String, Pairs>,
    trees: BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>,
}

impl Builder {
    fn put(&mut self, tree: &str, key: &[u8], value: &[u8]) {
        self.db.open_tree(tree).unwrap().insert(key, value).unwrap();
        self.written
            .entry(tree.to_string())
            .or_default()
            .add(key, value);
        self.trees
            .entry(tree.to_string())
            .or_default()
            .insert(key.to_vec(), value.to_vec());
    }

    fn remove(&mut self, tree: &str, key: &[u8]) {
        self.db.open_tree(tree).unwrap().remove(key).unwrap();
        self.trees.entry(tree.to_string()).or_default().remove(key);
    }

    fn touch(&mut self, tree: &str) {
        self.db.open_tree(tree).unwrap();
        self.written.entry(tree.to_string()).or_default();
        self.trees.entry(tree.to_string()).or_default();
    }
}

fn value(n: usize, len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (n.wrapping_mul(31) + i * 7) as u8 ^ salt)
        .collect()
}

fn build(name: &'static str, page_size: usize, script: impl FnOnce(&mut Builder)) -> Image {
    let dir = super::lock_dir();
    let storage = Arc::new(MemoryStorage::new());
    let options = Options::default()
        .page_size(page_size)
        .pool_size(4096 * (page_size + 512))
        .background_writer(false);
    let db = Db::open_with_storage(dir.path(), options, storage.clone()).expect("build image");
    let mut builder = Builder {
        db,
        written: BTreeMap::new(),
        trees: BTreeMap::new(),
    };
    script(&mut builder);
    let Builder {
        db, written, trees, ..
    } = builder;
    let report = db.check_integrity().expect("integrity of a fresh image");
    assert!(report.is_ok(), "image {name}: {report}");
    db.close().expect("close image");
    let mut bytes = vec![0u8; storage.len().unwrap() as usize];
    storage.read_at(&mut bytes, 0).unwrap();
    describe(name, page_size, bytes, written, trees)
}

fn describe(
    name: &'static str,
    page_size: usize,
    bytes: Vec<u8>,
    written: BTreeMap<String, Pairs>,
    trees: BTreeMap<String, BTreeMap<Vec<u8>, Vec<u8>>>,
) -> Image {
    let page_count = get_u64(&bytes, nodes::SB_PAGE_COUNT);
    assert_eq!(get_u32(&bytes, nodes::SB_PAGE_SIZE) as usize, page_size);
    assert!(bytes.len() as u64 >= page_count * page_size as u64);
    let catalog_root = get_u64(&bytes, nodes::SB_CATALOG_ROOT);
    let unknown = PageMeta {
        kind: PageKind::Unknown,
        owner: None,
        level: 0,
        root: false,
    };
    let mut pages = vec![unknown; page_count as usize];
    pages[0].kind = PageKind::Superblock;
    let page = |id: u64| &bytes[id as usize * page_size..(id as usize + 1) * page_size];
    // Walk the catalog, then every tree it names.
    let mut catalog = Pairs::default();
    let mut roots = vec![(CATALOG.to_string(), catalog_root)];
    let mut index = 0;
    while index < roots.len() {
        let (tree, root) = roots[index].clone();
        index += 1;
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            let node = parse_node(page(id), id).unwrap_or_else(|e| panic!("{name} page {id}: {e}"));
            pages[id as usize] = PageMeta {
                kind: if node.is_leaf() {
                    PageKind::Leaf
                } else {
                    PageKind::Inner
                },
                owner: Some(tree.clone()),
                level: node.level,
                root: id == root,
            };
            if tree == CATALOG && node.is_leaf() {
                for (key, value) in &node.entries {
                    catalog.add(key, value);
                    // The root page id, then the saved key count.
                    let child = u64::from_le_bytes(value[..8].try_into().unwrap());
                    roots.push((String::from_utf8(key.clone()).unwrap(), child));
                }
            }
            stack.extend(node.children.iter().map(|&w| swip_page(w).unwrap()));
        }
    }
    // The free-list chain.
    let mut next = get_u64(&bytes, nodes::SB_FREE_HEAD);
    while next != 0 {
        let trunk = page(next);
        pages[next as usize].kind = PageKind::FreeListTrunk;
        let count = get_u32(trunk, nodes::FL_COUNT) as usize;
        for i in 0..count {
            let id = get_u64(trunk, nodes::FL_IDS + 8 * i);
            pages[id as usize].kind = PageKind::Free;
        }
        next = get_u64(trunk, nodes::FL_NEXT);
    }
    let mut written: BTreeMap<String, Arc<Pairs>> = written
        .into_iter()
        .map(|(tree, pairs)| (tree, Arc::new(pairs)))
        .collect();
    let mut all = catalog.clone();
    written.insert(CATALOG.to_string(), Arc::new(catalog));
    for pairs in written.values() {
        for key in pairs.keys() {
            for value in pairs.map_values(key) {
                all.add(key, value);
            }
        }
    }
    all.add_wellformed_leaves(&bytes, page_size);
    let mut interesting = Vec::new();
    for kind in [
        PageKind::Superblock,
        PageKind::Leaf,
        PageKind::Inner,
        PageKind::FreeListTrunk,
        PageKind::Free,
        PageKind::Unknown,
    ] {
        let ids: Vec<u64> = (0..page_count)
            .filter(|&id| pages[id as usize].kind == kind)
            .collect();
        // A few of each kind, spread out.
        let step = (ids.len() / 4).max(1);
        interesting.extend(ids.iter().step_by(step).take(5));
    }
    interesting.extend(
        (0..page_count)
            .filter(|&id| pages[id as usize].root && pages[id as usize].kind != PageKind::Unknown),
    );
    interesting.sort_unstable();
    interesting.dedup();
    let keys = trees
        .values()
        .flat_map(|tree| tree.keys().cloned())
        .collect();
    Image {
        name,
        page_size,
        bytes,
        page_count,
        catalog_root,
        pages,
        trees,
        written,
        all: Arc::new(all),
        interesting,
        keys,
    }
}

impl Pairs {
    pub fn map_values(&self, key: &[u8]) -> Vec<&Vec<u8>> {
        self.map
            .get(key)
            .map(|values| values.iter().collect())
            .unwrap_or_default()
    }
}

/// Images for `open_file`: several trees and a free list; a catalog of two levels; 16 KiB
/// pages.
pub fn file_images() -> &'static [Image] {
    static IMAGES: OnceLock<Vec<Image>> = OnceLock::new();
    IMAGES.get_or_init(|| {
        vec![
            build("small", 4096, |b| {
                for n in 0..40 {
                    b.put("alpha", format!("a{n:03}").as_bytes(), &value(n, 12, 1));
                }
                for n in 0..300 {
                    b.put(
                        "beta",
                        format!("b{n:05}").as_bytes(),
                        &value(n, 10 + n % 120, 2),
                    );
                }
                b.touch("gamma");
                b.put("", b"", b"");
                for n in (0..300).filter(|n| n % 3 != 0) {
                    b.remove("beta", format!("b{n:05}").as_bytes());
                }
            }),
            build("catalog", 4096, |b| {
                for n in 0..150 {
                    let tree = format!("tree-{n:03}-{}", "x".repeat(30));
                    b.put(&tree, format!("k{n}").as_bytes(), &value(n, 8, 3));
                }
            }),
            build("big-pages", 16384, |b| {
                for n in 0..500 {
                    b.put(
                        "one",
                        format!("one-{n:04}").as_bytes(),
                        &value(n, n % 300, 4),
                    );
                }
                for n in 0..100 {
                    b.put("two", &(n as u32).to_be_bytes(), &value(n, 30, 5));
                }
                for n in (0..500).filter(|n| n % 5 != 0) {
                    b.remove("one", format!("one-{n:04}").as_bytes());
                }
            }),
        ]
    })
}

/// Images for `page`: tree "t" with 4 KiB pages. "short-keys" has two levels; "long-keys"
/// (150-byte keys with a shared prefix, so heads skip it) has three.
pub fn page_images() -> &'static [Image] {
    static IMAGES: OnceLock<Vec<Image>> = OnceLock::new();
    IMAGES.get_or_init(|| {
        vec![
            build("short-keys", 4096, |b| {
                for n in 0..400 {
                    b.put("t", &short_key(n), &value(n, (n * 37) % 150, 6));
                }
                for n in (0..400).step_by(7) {
                    b.remove("t", &short_key(n));
                }
            }),
            build("long-keys", 4096, |b| {
                for n in 0..700 {
                    b.put("t", &long_key(n), &value(n, 24, 7));
                }
                for n in (0..700).step_by(5) {
                    b.remove("t", &long_key(n));
                }
            }),
        ]
    })
}

pub fn short_key(n: usize) -> Vec<u8> {
    format!("key{n:05}").into_bytes()
}

pub fn long_key(n: usize) -> Vec<u8> {
    let mut key = b"customer/warehouse-0001/district-07/".to_vec();
    key.resize(150, b'.');
    key.extend_from_slice(format!("{n:06}").as_bytes());
    key
}
