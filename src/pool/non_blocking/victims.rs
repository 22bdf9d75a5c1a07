//! Which queues a thief visits, in which order (Eigen's randomized coprime walk).
//!
//! To visit the `size` queues of a range each exactly once in a random order without any
//! allocation, start at a random queue and step by a random stride coprime with `size`:
//! `victim, victim + inc, victim + 2 inc, ... (mod size)` is then a permutation. The coprimes of
//! every size up to the pool's capacity are computed once at construction. Random numbers are
//! reduced to a range with Lemire's multiply-shift instead of a division.
#![forbid(unsafe_code)]

/// The coprimes of every range size `1..=max`.
#[derive(Debug)]
pub(super) struct VictimOrder {
    coprimes: Vec<Vec<u32>>,
}

/// Maps a uniform `u32` onto `[0, n)` without a division.
#[inline(always)]
pub(super) fn reduce(random: u32, n: usize) -> usize {
    ((random as u64 * n as u64) >> 32) as usize
}

fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl VictimOrder {
    pub(super) fn new(max: usize) -> Self {
        let coprimes = (1..=max.max(1))
            .map(|size| {
                (1..=size)
                    .filter(|&i| gcd(i, size) == 1)
                    .map(|i| i as u32)
                    .collect()
            })
            .collect();
        Self { coprimes }
    }

    /// A walk over `[start, limit)` seeded by `random`: yields every index exactly once.
    #[inline]
    pub(super) fn walk(&self, start: usize, limit: usize, random: u32) -> Walk {
        let size = limit - start;
        if size == 0 {
            return Walk {
                start,
                size,
                next: 0,
                stride: 1,
                left: 0,
            };
        }
        let strides = &self.coprimes[size - 1];
        // The two draws use different bits of `random`, as Eigen does.
        let next = reduce(random, size);
        let stride = strides[reduce(random.rotate_left(16), strides.len())] as usize;
        Walk {
            start,
            size,
            next,
            stride,
            left: size,
        }
    }
}

/// One randomized pass over a range of queues.
#[derive(Debug)]
pub(super) struct Walk {
    start: usize,
    size: usize,
    next: usize,
    stride: usize,
    left: usize,
}

impl Iterator for Walk {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let victim = self.start + self.next;
        self.next += self.stride;
        if self.next >= self.size {
            self.next -= self.size;
        }
        Some(victim)
    }
}

/// A steal partition `[start, limit)` packed into one word so it can live in an atomic.
pub(super) fn encode_partition(start: usize, limit: usize) -> u64 {
    ((start as u64) << 32) | limit as u64
}

/// The inverse of [`encode_partition`].
pub(super) fn decode_partition(packed: u64) -> (usize, usize) {
    ((packed >> 32) as usize, (packed & 0xffff_ffff) as usize)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn every_walk_is_a_permutation_of_its_range() {
        let order = VictimOrder::new(20);
        let mut rng = fastrand::Rng::with_seed(7);
        for size in 1..=20 {
            for _ in 0..50 {
                let mut seen: Vec<usize> = order.walk(3, 3 + size, rng.u32(..)).collect();
                seen.sort_unstable();
                assert_eq!(seen, (3..3 + size).collect::<Vec<_>>(), "size {size}");
            }
        }
    }

    #[test]
    fn empty_range_walks_nowhere() {
        assert_eq!(VictimOrder::new(4).walk(2, 2, 99).count(), 0);
    }

    #[test]
    fn reduce_stays_in_range() {
        for random in [0, 1, u32::MAX / 2, u32::MAX] {
            assert!(reduce(random, 7) < 7);
        }
    }

    #[test]
    fn partitions_round_trip() {
        assert_eq!(decode_partition(encode_partition(5, 9)), (5, 9));
    }
}
