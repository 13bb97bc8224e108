//! Turning fuzzer bytes into decisions, and a small deterministic generator for content.
//!
//! Every decision reads a few bytes; once the input is used up every read answers zero, so any
//! byte string is a valid input and loops over "the rest of the input" end.

/// A cursor over the fuzzer's bytes.
pub struct Input<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Input<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Input { data, pos: 0 }
    }

    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }

    /// The bytes not read yet (and marks them read).
    pub fn rest(&mut self) -> &'a [u8] {
        let rest = &self.data[self.pos.min(self.data.len())..];
        self.pos = self.data.len();
        rest
    }

    pub fn u8(&mut self) -> u8 {
        let byte = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        byte
    }

    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    pub fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | (u64::from(self.u32()) << 32)
    }

    /// A number below `n` (0 when `n` is 0). One byte for small `n`, more for larger ones.
    pub fn below(&mut self, n: usize) -> usize {
        match n {
            0 | 1 => {
                if n == 1 {
                    self.u8();
                }
                0
            }
            2..=256 => usize::from(self.u8()) % n,
            257..=65536 => usize::from(self.u16()) % n,
            _ => (self.u32() as usize) % n,
        }
    }

    /// True with probability `numerator / denominator` (for bytes that look random).
    pub fn chance(&mut self, numerator: u8, denominator: u8) -> bool {
        self.u8() % denominator < numerator
    }

    /// Picks an element (None for an empty slice).
    pub fn pick<'s, T>(&mut self, items: &'s [T]) -> Option<&'s T> {
        if items.is_empty() {
            None
        } else {
            Some(&items[self.below(items.len())])
        }
    }
}

/// SplitMix64: deterministic content and inputs for the stable fallback.
#[derive(Clone)]
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next() % n
        }
    }

    pub fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let word = self.next().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}
