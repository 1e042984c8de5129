//! The order in which ORT visits a graph's initializers when it walks
//! `Graph::GetAllInitializedTensors()`: its `InitializedTensorSet` is a
//! `std::unordered_map<std::string, const TensorProto*>`, so the order is that of the C++
//! standard library ORT's Linux wheels are built with (libstdc++): `std::hash<std::string>`
//! (`_Hash_bytes`, MurmurHash64A with seed `0xc70f6907`) modulo a prime bucket count that
//! `_Prime_rehash_policy` grows as elements are inserted, each new element placed first in its
//! bucket and a bucket first used placed first in the one singly linked list the iteration walks
//! (a rehash relinks the list the same way, in its old order). `ConstantSharing` keeps the
//! first of equal initializers in this order (measured with the CPU wheels on
//! `unseen2/ortopt-fp16.clip`: the layer-0 copy of a constant shared by both layers survives).
//! Erasures do not reorder the others; names inserted again are ignored, as `emplace` does.

/// libstdc++'s `__prime_list` from its seventh entry on (the bucket counts above 13;
/// `_M_next_bkt` takes smaller ones from a table of its own).
const PRIMES: &[u64] = &[
    17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73, 79, 83, 89, 97, 103, 109, 113, 127,
    137, 139, 149, 157, 167, 179, 193, 199, 211, 227, 241, 257, 277, 293, 313, 337, 359, 383, 409,
    439, 467, 503, 541, 577, 619, 661, 709, 761, 823, 887, 953, 1031, 1109, 1193, 1289, 1381, 1493,
    1613, 1741, 1879, 2029, 2179, 2357, 2549, 2753, 2971, 3209, 3469, 3739, 4027, 4349, 4703, 5087,
    5503, 5953, 6427, 6949, 7517, 8123, 8783, 9497, 10273, 11113, 12011, 12983, 14033, 15173,
    16411, 17749, 19183, 20753, 22447, 24281, 26267, 28411, 30727, 33223, 35933, 38873, 42043,
    45481, 49201, 53201, 57557, 62233, 67307, 72817, 78779, 85229, 92203, 99733, 107897, 116731,
    126271, 136607, 147793, 159871, 172933, 187091, 202409, 218971, 236897, 256279, 277261, 299951,
    324503, 351061, 379787, 410857, 444487, 480881, 520241, 562841, 608903, 658753, 712697, 771049,
    834181, 902483, 976369, 1056323, 1142821, 1236397, 1337629, 1447153, 1565659, 1693859, 1832561,
    1982627, 2144977, 2320627, 2510653, 2716249, 2938679, 3179303, 3439651, 3721303, 4026031,
    4355707, 4712381, 5098259, 5515729, 5967347, 6456007, 6984629, 7556579, 8175383, 8844859,
    9569143, 10352717, 11200489, 12117689, 13109983, 14183539, 15345007, 16601593, 17961079,
    19431899, 21023161, 22744717, 24607243, 26622317, 28802401, 31160981, 33712729, 36473443,
    39460231, 42691603, 46187573, 49969847, 54061849, 58488943, 63278561, 68460391, 74066549,
    80131819, 86693767, 93793069, 101473717, 109783337, 118773397, 128499677, 139022417, 150406843,
    162723577, 176048909, 190465427, 206062531, 222936881, 241193053, 260944219, 282312799,
    305431229, 330442829, 357502601, 386778277, 418451333, 452718089, 489790921, 529899637,
    573292817, 620239453, 671030513, 725980837, 785430967, 849749479, 919334987, 994618837,
    1076067617, 1164186217, 1259520799, 1362662261, 1474249943, 1594975441, 1725587117, 1866894511,
    2019773507, 2185171673, 2364114217, 2557710269, 2767159799, 2993761039, 3238918481, 3504151727,
    3791104843, 4101556399, 4294967291, 6442450933,
];

/// `_M_next_bkt`'s table for hints under 14.
const FAST: [u64; 14] = [2, 2, 2, 3, 5, 5, 7, 7, 11, 11, 11, 11, 13, 13];

const MUL: u64 = (0xc6a4_a793_u64 << 32) + 0x5bd1_e995;

fn shift_mix(v: u64) -> u64 {
    v ^ (v >> 47)
}

/// libstdc++'s `std::_Hash_bytes(data, len, 0xc70f6907)` for a 64-bit `size_t`.
pub fn std_hash(bytes: &[u8]) -> u64 {
    let seed: u64 = 0xc70f_6907;
    let mut hash = seed ^ (bytes.len() as u64).wrapping_mul(MUL);
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let data = shift_mix(u64::from_le_bytes(w).wrapping_mul(MUL)).wrapping_mul(MUL);
        hash ^= data;
        hash = hash.wrapping_mul(MUL);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        w[..rest.len()].copy_from_slice(rest);
        hash ^= u64::from_le_bytes(w);
        hash = hash.wrapping_mul(MUL);
    }
    shift_mix(shift_mix(hash).wrapping_mul(MUL))
}

/// `_Prime_rehash_policy` with the maximum load factor 1.
struct Policy {
    next_resize: u64,
}

impl Policy {
    fn next_bkt(&mut self, n: u64) -> u64 {
        if let Some(&b) = usize::try_from(n).ok().and_then(|i| FAST.get(i)) {
            if n == 0 {
                return 1;
            }
            self.next_resize = b;
            return b;
        }
        let last = PRIMES.len() - 1;
        let i = PRIMES[..last].partition_point(|&p| p < n);
        if i == last {
            self.next_resize = u64::MAX;
        } else {
            self.next_resize = PRIMES[i];
        }
        PRIMES[i]
    }

    /// `_M_need_rehash(n_bkt, n_elt, 1)`: the new bucket count, if one is needed.
    fn need_rehash(&mut self, n_bkt: u64, n_elt: u64) -> Option<u64> {
        let n = n_elt.saturating_add(1);
        if n <= self.next_resize {
            return None;
        }
        let min_bkts = n.max(if self.next_resize == 0 { 11 } else { 0 });
        if min_bkts >= n_bkt {
            return Some(self.next_bkt(min_bkts.saturating_add(1).max(n_bkt.saturating_mul(2))));
        }
        self.next_resize = n_bkt;
        None
    }
}

const NIL: usize = usize::MAX;
/// A bucket whose "before" node is the list head (`_M_before_begin`).
const BEFORE_BEGIN: usize = usize::MAX - 1;

/// The iteration order of a `std::unordered_map<std::string, _>` into which `names` were
/// emplaced in order (a name already in it is skipped). The names are hashed by their texts
/// (`&str`s, or interned names).
pub fn iteration_order<T>(names: impl IntoIterator<Item = T>) -> Vec<T>
where
    T: Copy + Eq + std::hash::Hash + AsRef<str>,
{
    let mut keys: Vec<T> = Vec::new();
    let mut codes: Vec<u64> = Vec::new();
    let mut next: Vec<usize> = Vec::new();
    let mut seen: crate::sym::SymSet<T> = Default::default();
    let mut head = NIL;
    let mut buckets: Vec<usize> = vec![NIL; 1];
    let mut policy = Policy { next_resize: 0 };
    // The node after `before` (the head for `BEFORE_BEGIN`), and setting it.
    fn after(next: &[usize], head: usize, before: usize) -> usize {
        if before == BEFORE_BEGIN {
            head
        } else {
            next[before]
        }
    }
    fn link(next: &mut [usize], head: &mut usize, before: usize, node: usize) {
        if before == BEFORE_BEGIN {
            *head = node;
        } else {
            next[before] = node;
        }
    }
    // `_M_insert_bucket_begin`.
    fn insert(
        next: &mut [usize],
        head: &mut usize,
        buckets: &mut [usize],
        codes: &[u64],
        node: usize,
    ) {
        let nb = buckets.len() as u64;
        let bkt = (codes[node] % nb) as usize;
        if buckets[bkt] != NIL {
            let before = buckets[bkt];
            next[node] = after(next, *head, before);
            link(next, head, before, node);
        } else {
            next[node] = *head;
            *head = node;
            if next[node] != NIL {
                buckets[(codes[next[node]] % nb) as usize] = node;
            }
            buckets[bkt] = BEFORE_BEGIN;
        }
    }
    for name in names {
        if !seen.insert(name) {
            continue;
        }
        let node = keys.len();
        if let Some(nb) = policy.need_rehash(buckets.len() as u64, node as u64) {
            // `_M_rehash_aux`: relink every node, in list order, into the new buckets.
            let Ok(nb) = usize::try_from(nb) else {
                break;
            };
            let mut fresh = vec![NIL; nb];
            let mut p = head;
            head = NIL;
            let mut bbegin = 0usize;
            while p != NIL {
                let after_p = next[p];
                let bkt = (codes[p] % nb as u64) as usize;
                if fresh[bkt] == NIL {
                    next[p] = head;
                    head = p;
                    fresh[bkt] = BEFORE_BEGIN;
                    if next[p] != NIL {
                        fresh[bbegin] = p;
                    }
                    bbegin = bkt;
                } else {
                    let before = fresh[bkt];
                    next[p] = after(&next, head, before);
                    link(&mut next, &mut head, before, p);
                }
                p = after_p;
            }
            buckets = fresh;
        }
        keys.push(name);
        codes.push(std_hash(name.as_ref().as_bytes()));
        next.push(NIL);
        insert(&mut next, &mut head, &mut buckets, &codes, node);
    }
    let mut out = Vec::with_capacity(keys.len());
    let mut p = head;
    while p != NIL && out.len() < keys.len() {
        out.push(keys[p]);
        p = next[p];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Orders printed by a C++ program (g++ 13, libstdc++) emplacing the same names into a
    /// `std::unordered_map<std::string, int>`.
    #[test]
    fn matches_libstdcxx() {
        assert_eq!(iteration_order(["a", "b", "c"]), ["c", "b", "a"]);
        // `init_0` .. `init_199`, through the rehashes to 13, 29, 59, 127 and 257 buckets, and a
        // name emplaced twice.
        let names: Vec<String> = (0..200).map(|i| format!("init_{i}")).collect();
        let mut with_repeat: Vec<&str> = names.iter().map(String::as_str).collect();
        with_repeat.insert(50, "init_7");
        let want: Vec<String> = [
            199, 196, 195, 193, 188, 187, 192, 186, 183, 177, 174, 173, 168, 166, 165, 164, 163,
            159, 154, 153, 150, 147, 145, 197, 184, 143, 194, 142, 141, 138, 137, 135, 134, 133,
            152, 132, 190, 130, 128, 127, 58, 12, 185, 56, 149, 55, 47, 43, 42, 38, 162, 41, 131,
            44, 50, 36, 157, 35, 144, 54, 124, 90, 45, 30, 29, 34, 86, 176, 1, 139, 33, 21, 7, 88,
            182, 146, 14, 69, 98, 5, 53, 94, 123, 191, 48, 126, 32, 117, 17, 27, 80, 115, 51, 13,
            118, 179, 49, 76, 2, 175, 40, 9, 15, 10, 25, 178, 16, 120, 24, 46, 110, 170, 19, 161,
            129, 22, 39, 85, 28, 158, 156, 3, 26, 37, 171, 140, 111, 59, 189, 70, 60, 83, 109, 62,
            198, 122, 100, 11, 64, 65, 63, 66, 20, 67, 136, 68, 61, 8, 102, 97, 121, 71, 155, 78,
            72, 57, 73, 75, 151, 52, 119, 106, 77, 180, 148, 79, 81, 84, 82, 91, 31, 6, 101, 87,
            89, 92, 93, 23, 95, 167, 96, 160, 99, 18, 103, 104, 172, 105, 112, 74, 107, 114, 108,
            113, 4, 116, 181, 169, 0, 125,
        ]
        .iter()
        .map(|i| format!("init_{i}"))
        .collect();
        assert_eq!(iteration_order(with_repeat), want);
    }

    #[test]
    fn hashes_as_libstdcxx() {
        assert_eq!(std_hash(b"abc"), 0x32d8_2bf8_ed3d_ba39);
        assert_eq!(
            std_hash(b"/encoder/layers.0/self_attn/Constant_12_output_0"),
            0x9721_a16c_5da2_ff35
        );
    }
}
