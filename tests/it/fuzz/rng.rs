//! A small deterministic generator (SplitMix64): every case is reproducible from one `u64`.

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        let span = (hi as i128 - lo as i128 + 1) as u128;
        (lo as i128 + (u128::from(self.next()) % span) as i128) as i64
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.next() % den < num
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        let i = self.below(items.len());
        items.get(i)
    }

    /// A small integer most of the time, an extreme one sometimes: what breaks arithmetic.
    pub fn interesting_int(&mut self) -> i64 {
        match self.below(12) {
            0 => *self
                .pick(&[
                    i64::MAX,
                    i64::MIN,
                    i64::MAX - 1,
                    i64::MIN + 1,
                    1 << 31,
                    (1 << 31) - 1,
                    -(1 << 31),
                    1 << 32,
                    1 << 16,
                    65_537,
                    1 << 62,
                ])
                .unwrap_or(&0),
            1 => -1,
            2 => 0,
            3 => self.range(-10, 10),
            4 => self.range(0, 1 << 20),
            _ => self.range(0, 8),
        }
    }
}
