//! Values stored outside the leaves (large values, `crate::blob`): the tree's side.
//!
//! A value longer than a leaf holds (a quarter page) is written to pages of its own before
//! the leaf operation (no I/O happens under a latch), and the leaf stores a reference to it.
//! Reads copy the reference out of the leaf, leave the epoch, and read the pages. A reader
//! that finds a page of another value (the key was overwritten, and the old value's pages
//! reused, while it read) looks the key up again; if the key still references the value it
//! read, the page is damaged.
//!
//! Invariant: a reference is copied out of a leaf under a validated version or a latch, and
//! read only outside every epoch and latch.

use super::*;

impl<P: Policy> BTree<P> {
    /// Longest value stored in its leaf.
    pub(crate) fn max_inline(&self) -> usize {
        node::max_value_size(self.bm.page_size())
    }

    /// The value of `key` as its leaf stores it.
    pub(crate) fn stored_value(&self, key: &[u8]) -> Result<Option<StoredValue>> {
        self.bm.run(|mode| {
            self.read_leaf(key, Bound::AtLeast, mode, |leaf| {
                match leaf.lower_bound(key) {
                    (index, true) => Some(StoredValue::of(leaf.stored(index))),
                    _ => None,
                }
            })
        })
    }

    fn decode_blob(&self, reference: &[u8]) -> Result<BlobRef> {
        BlobRef::decode(reference, self.bm.page_size())
            .map_err(|reason| Error::corruption(0, format!("in a leaf: {reason}")))
    }

    /// Replaces the reference in `buffer`, read from `key`'s leaf, with the large value it
    /// names. False if the key was overwritten meanwhile: look it up again.
    pub(super) fn read_large(&self, key: &[u8], buffer: &mut Vec<u8>) -> Result<bool> {
        let blob = self.decode_blob(buffer)?;
        let reference = std::mem::take(buffer);
        let len = usize::try_from(blob.len)
            .map_err(|_| Error::corruption(0, "a large value beyond the address space"))?;
        buffer.clear();
        match self.bm.read_blob(&blob, 0, len, buffer)? {
            Ok(()) => Ok(true),
            Err((page_id, reason)) => {
                self.changed_meanwhile(key, &reference, page_id, reason)?;
                Ok(false)
            }
        }
    }

    /// After a page of the large value with `reference` failed its check: fine if `key` no
    /// longer references it (it was replaced, and its pages reused, while it was read), else
    /// the page is damaged.
    fn changed_meanwhile(
        &self,
        key: &[u8],
        reference: &[u8],
        page_id: u64,
        reason: String,
    ) -> Result<()> {
        match self.stored_value(key)? {
            Some(current) if current.blob && current.bytes == reference => {
                Err(Error::corruption(page_id, reason))
            }
            _ => Ok(()),
        }
    }

    /// The value of an entry that a scan copied from `key`'s leaf as `stored`, into `out`
    /// (a large value is read; if it changed meanwhile, the key is looked up again). False if
    /// the key is gone by then.
    pub(crate) fn scanned_value(
        &self,
        key: &[u8],
        stored: Stored<'_>,
        out: &mut Vec<u8>,
    ) -> Result<bool> {
        out.clear();
        out.extend_from_slice(stored.bytes);
        if !stored.blob || self.read_large(key, out)? {
            return Ok(true);
        }
        self.lookup(key, out)
    }

    /// Copies up to `len` bytes of `key`'s value from byte `offset` on (fewer at its end,
    /// none past it) into `out`; returns the value's whole length, or `None` if the key is
    /// absent. A large value is read only where asked.
    pub(crate) fn lookup_part(
        &self,
        key: &[u8],
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<Option<u64>> {
        loop {
            out.clear();
            let Some(stored) = self.stored_value(key)? else {
                return Ok(None);
            };
            let blob = stored
                .blob
                .then(|| self.decode_blob(&stored.bytes))
                .transpose()?;
            let total = blob
                .as_ref()
                .map_or(stored.bytes.len() as u64, |blob| blob.len);
            let start = offset.min(total);
            let end = start.saturating_add(len as u64).min(total);
            let Some(blob) = blob else {
                out.extend_from_slice(&stored.bytes[start as usize..end as usize]);
                return Ok(Some(total));
            };
            match self
                .bm
                .read_blob(&blob, start, (end - start) as usize, out)?
            {
                Ok(()) => return Ok(Some(total)),
                Err((page_id, reason)) => {
                    self.changed_meanwhile(key, &stored.bytes, page_id, reason)?
                }
            }
        }
    }

    /// Adds the large values `leaf` references to `blobs`.
    pub(super) fn collect_blobs(&self, leaf: &Node<'_>, blobs: &mut Vec<BlobRef>) {
        let page_size = self.bm.page_size();
        blobs.extend(
            (0..leaf.count()).filter_map(|index| leaf.stored(index).large_value(page_size)),
        );
    }
}
