//! A small deterministic generator the central manager's benches share (no
//! dependency; the same pool every run).

/// A linear congruential generator.
pub struct Lcg(pub u64);

#[allow(dead_code, reason = "each bench uses its own part")]
impl Lcg {
    /// The next 31 bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() as usize) % items.len()]
    }

    /// `bytes` random bytes in hexadecimal.
    pub fn hex(&mut self, bytes: usize) -> String {
        (0..bytes).map(|_| format!("{:02x}", self.next() as u8)).collect()
    }
}
