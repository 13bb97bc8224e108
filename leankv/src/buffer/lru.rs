//! The LRU list of the `Lru` and `Traditional` ablations: every hot frame in access order.
//!
//! A doubly linked list over frame indexes, kept outside the frame headers (only these
//! ablations allocate it) and entirely under the buffer manager's one LRU mutex, which every
//! page access takes: that global write on every access is the cost the ablation measures.
//! Invariant: a frame is linked exactly when it is hot (or is being made hot) and has not been
//! chosen as a victim since.

use super::frame::FrameId;

const NONE: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Links {
    older: u32,
    newer: u32,
    linked: bool,
}

pub(crate) struct LruList {
    links: Vec<Links>,
    oldest: u32,
    newest: u32,
}

impl LruList {
    pub(crate) fn new(frames: u32) -> LruList {
        let unlinked = Links {
            older: NONE,
            newer: NONE,
            linked: false,
        };
        LruList {
            links: vec![unlinked; frames as usize],
            oldest: NONE,
            newest: NONE,
        }
    }

    /// Makes `frame` the most recently used, linking it if it is not in the list.
    pub(crate) fn touch(&mut self, frame: FrameId) {
        if self.newest == frame {
            return;
        }
        self.remove(frame);
        let links = &mut self.links[frame as usize];
        links.older = self.newest;
        links.newer = NONE;
        links.linked = true;
        match self.newest {
            NONE => self.oldest = frame,
            newest => self.links[newest as usize].newer = frame,
        }
        self.newest = frame;
    }

    /// Unlinks `frame` if it is linked.
    pub(crate) fn remove(&mut self, frame: FrameId) {
        let Links {
            older,
            newer,
            linked,
        } = self.links[frame as usize];
        if !linked {
            return;
        }
        match older {
            NONE => self.oldest = newer,
            older => self.links[older as usize].newer = newer,
        }
        match newer {
            NONE => self.newest = older,
            newer => self.links[newer as usize].older = older,
        }
        self.links[frame as usize].linked = false;
    }

    /// Up to `limit` frames from the least recently used end, oldest first.
    pub(crate) fn oldest(&self, limit: usize) -> Vec<FrameId> {
        let mut frames = Vec::with_capacity(limit);
        let mut cursor = self.oldest;
        while cursor != NONE && frames.len() < limit {
            frames.push(cursor);
            cursor = self.links[cursor as usize].newer;
        }
        frames
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn touch_moves_to_the_young_end_and_remove_unlinks() {
        let mut lru = LruList::new(8);
        for frame in [3, 1, 4, 5] {
            lru.touch(frame);
        }
        assert_eq!(lru.oldest(10), vec![3, 1, 4, 5]);
        lru.touch(1);
        lru.touch(3);
        assert_eq!(lru.oldest(10), vec![4, 5, 1, 3]);
        lru.remove(5);
        lru.remove(5);
        lru.remove(4);
        assert_eq!(lru.oldest(10), vec![1, 3]);
        lru.touch(6);
        assert_eq!(lru.oldest(2), vec![1, 3]);
        assert_eq!(lru.oldest(10), vec![1, 3, 6]);
    }
}
