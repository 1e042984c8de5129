//! Interned names: every value, node, op, domain and attribute name the analysis handles is
//! stored once per process and handled as a [`Sym`], a 4-byte integer id. Two syms are equal
//! exactly when their texts are, so comparing or hashing names is comparing or hashing one
//! integer, and copying a name copies four bytes.
//!
//! The table is process-wide and append-only: a name, once interned, keeps its id and its text
//! until the process ends (a model's names are a few percent of its file; a process that
//! analyses many models keeps the names of all of them). Ids come from [`Sym::new`] only, so an
//! id's text is always there to read; reading it takes no lock.
//!
//! A few names the analysis compares against all the time (the empty name, the ONNX domains)
//! are predefined: their ids are constants ([`Sym::EMPTY`], [`Sym::AI_ONNX`], ...).
//!
//! A leaf module: depends on nothing else in the crate.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// An interned name. `Ord` compares the texts (so sorting syms sorts names); `Hash` and `Eq`
/// use the id.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Sym(u32);

macro_rules! predefined {
    ($($konst:ident = $text:literal,)*) => {
        /// The predefined names, their ids in order.
        const PREDEFINED: &[&str] = &[$($text,)*];
        #[allow(non_camel_case_types, clippy::upper_case_acronyms, dead_code)]
        #[repr(u32)]
        enum Predefined { $($konst,)* }
        impl Sym {
            $(
                #[doc = concat!("`", $text, "`")]
                pub const $konst: Sym = Sym(Predefined::$konst as u32);
            )*
        }
    };
}

predefined! {
    // The empty name (an omitted optional input or output).
    EMPTY = "",
    // Domains.
    AI_ONNX = "ai.onnx",
    COM_MICROSOFT = "com.microsoft",
    AI_ONNX_ML = "ai.onnx.ml",
    COM_MICROSOFT_NCHWC = "com.microsoft.nchwc",
    COM_MS_INTERNAL_NHWC = "com.ms.internal.nhwc",
    // Ops the per-node passes test for on every node.
    CAST = "Cast",
    DEQUANTIZE_LINEAR = "DequantizeLinear",
    QUANTIZE_LINEAR = "QuantizeLinear",
    RESHAPE = "Reshape",
    SHAPE = "Shape",
    TRANSPOSE = "Transpose",
    // Control flow the passes special-case.
    IF = "If",
    LOOP = "Loop",
    // The copies the memcpy pass inserts.
    MEMCPY_FROM_HOST = "MemcpyFromHost",
    MEMCPY_TO_HOST = "MemcpyToHost",
}

/// Slots of the first chunk of the id table; chunk `c` holds `FIRST << c` slots, so 23 chunks
/// hold more ids than a `u32` counts.
const FIRST_BITS: u32 = 10;
const CHUNKS: usize = 23;
/// Bytes of one block of the text arena; longer names get a block of their own.
const BLOCK: usize = 64 * 1024;

/// One slot of the id table: the text's address and length, set once (length first, then the
/// address with `Release`) under the interner's lock before the id is handed out; a reader loads
/// the address with `Acquire` and takes no lock. A null address is a slot not set.
type Slot = (AtomicPtr<u8>, AtomicUsize);
type Chunk = Box<[Slot]>;

/// The id → text table: chunks allocated on first use, each slot set once, before its id is
/// handed out.
static CHUNK_TABLE: [OnceLock<Chunk>; CHUNKS] = [const { OnceLock::new() }; CHUNKS];

/// The text → id map and the arena the texts live in, behind one lock (interning only).
static INTERNER: Mutex<Table> = Mutex::new(Table {
    ids: None,
    next: 0,
    block: &mut [],
});

/// A text's entry in the interner: the high half of its hash (a tag that most probes of other
/// texts stop at without reading a text) and its id. Eight bytes, not the hash, id and text
/// (32): the table of a million-node graph has 8M slots, 64 MiB instead of 256 MiB that the
/// kernel would fault in and clear a page at a time.
type Entry = (u32, u32);

struct Table {
    /// Text → id, as (tag of the text's hash, id): built on first use, with the predefined
    /// names. A probe whose tag matches reads the text from the id table.
    ids: Option<Probe>,
    /// Ids handed out past the predefined ones.
    next: u32,
    /// What is left of the current arena block.
    block: &'static mut [u8],
}

/// The text -> id table: open addressing with linear probing over entries that hold a tag of
/// the text's hash and its id, at most half full (the callers reserve a graph's worth, so it
/// seldom grows; growing hashes every text again). Its
/// own rather than `hashbrown`'s so that a reader of many names can ask for the slot of a name
/// it will intern soon to be fetched into the cache meanwhile ([`Interner::prefetch`]): on a
/// million-node model the table holds millions of entries and nearly every probe misses the
/// cache.
struct Probe {
    /// `EMPTY_ID` marks a free slot.
    slots: Box<[Entry]>,
    len: usize,
}

const EMPTY_ID: u32 = u32::MAX;
const FREE: Entry = (0, EMPTY_ID);

/// Tables of at least this many slots (32 MiB) have them written on several threads.
const PARALLEL_FREE_SLOTS: usize = 1 << 20;

/// `n` free slots. A large table is written on several threads (at most 8), 2 MiB at a time:
/// the table a million-node graph reserves has 8M slots, 64 MiB, and writing them is mostly
/// the kernel faulting their pages in and clearing them, which it does on each core at once (on
/// one, a tenth of a second before the graph's first name is interned). Where the system gives
/// no thread, this one writes them all.
fn free_slots(n: usize) -> Box<[Entry]> {
    let threads = crate::threads::threads();
    if n < PARALLEL_FREE_SLOTS || threads < 2 {
        return vec![FREE; n].into_boxed_slice();
    }
    let mut slots = Box::<[Entry]>::new_uninit_slice(n);
    crate::threads::write_parts(&mut slots, 1 << 16, threads, "interner", |part| {
        for e in part {
            e.write(FREE);
        }
    });
    // SAFETY: every slot is written: `write_parts` hands out every part once, each is written
    // whole, and writing cannot panic (a thread that panicked would have been resumed before
    // this line).
    unsafe { slots.assume_init() }
}

impl Probe {
    fn with_capacity(n: usize) -> Probe {
        let slots = n.saturating_mul(2).next_power_of_two().max(16);
        Probe {
            slots: free_slots(slots),
            len: 0,
        }
    }

    fn mask(&self) -> usize {
        self.slots.len() - 1
    }

    fn find(&self, s: &str, h: u64) -> Option<u32> {
        let mask = self.mask();
        let mut i = (h as usize) & mask;
        let tag = tag_of(h);
        loop {
            let (etag, id) = self.slots[i];
            if id == EMPTY_ID {
                return None;
            }
            if etag == tag && Sym(id).as_str() == s {
                return Some(id);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds id `id`, whose text (hashed `h`) is not in the table; the id table has its text.
    fn insert_unique(&mut self, h: u64, id: u32) {
        self.reserve(1);
        let mask = self.mask();
        let mut i = (h as usize) & mask;
        while self.slots[i].1 != EMPTY_ID {
            i = (i + 1) & mask;
        }
        self.slots[i] = (tag_of(h), id);
        self.len += 1;
    }

    /// Room for `n` more entries with the table at most half full.
    fn reserve(&mut self, n: usize) {
        let want = self.len.saturating_add(n).saturating_mul(2);
        if want <= self.slots.len() {
            return;
        }
        let old = std::mem::replace(self, Probe::with_capacity(self.len.saturating_add(n)));
        for &(_, id) in old.slots.iter().filter(|e| e.1 != EMPTY_ID) {
            self.insert_unique(text_hash(Sym(id).as_str()), id);
        }
    }

    /// Asks for the slot where a text hashed `h` is looked up first to be brought into the
    /// cache (a hint: nothing happens where the processor has no such instruction).
    fn prefetch(&self, h: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            let slot: *const Entry = &self.slots[(h as usize) & self.mask()];
            // SAFETY: a prefetch is a hint that reads nothing the program sees and cannot
            // fault; `slot` is a valid reference's address anyway.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(slot.cast());
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = h;
    }
}

/// Asks for the cache line at `p` to be brought into the cache (a hint: nothing happens where
/// the processor has no such instruction; no memory is read that the program sees).
#[inline(always)]
pub fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that reads nothing the program sees and cannot fault,
    // whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// The tag an entry keeps of hash `h`: the half that the slot's position does not come from.
fn tag_of(h: u64) -> u32 {
    (h >> 32) as u32
}

/// The chunk and slot of interned id `k` (counted past the predefined names).
fn slot_of(k: u32) -> (usize, usize) {
    let at = u64::from(k) + (1u64 << FIRST_BITS);
    let chunk = (63 - at.leading_zeros() - FIRST_BITS) as usize;
    let slot = (at - (1u64 << (chunk as u32 + FIRST_BITS))) as usize;
    (chunk, slot)
}

impl Table {
    fn ids(&mut self) -> &mut Probe {
        self.ids.get_or_insert_with(|| {
            let mut t = Probe::with_capacity(PREDEFINED.len());
            for (i, s) in PREDEFINED.iter().enumerate() {
                t.insert_unique(text_hash(s), i as u32);
            }
            t
        })
    }

    /// The id of `s` (hashed `h`), if interned.
    fn find(&mut self, s: &str, h: u64) -> Option<u32> {
        self.ids().find(s, h)
    }

    /// Room for `n` more names without growing.
    fn reserve(&mut self, n: usize) {
        self.ids().reserve(n);
    }

    /// A copy of `s` that lives as long as the process.
    fn store(&mut self, s: &str) -> &'static str {
        let bytes = s.as_bytes();
        let stored: &'static [u8] = if bytes.len() > BLOCK / 4 {
            Box::leak(bytes.to_vec().into_boxed_slice())
        } else {
            if self.block.len() < bytes.len() {
                self.block = Box::leak(vec![0u8; BLOCK].into_boxed_slice());
            }
            let (head, tail) = std::mem::take(&mut self.block).split_at_mut(bytes.len());
            head.copy_from_slice(bytes);
            self.block = tail;
            head
        };
        // SAFETY: `stored` holds a copy of the bytes of the `&str` `s`: UTF-8.
        unsafe { std::str::from_utf8_unchecked(stored) }
    }

    fn intern(&mut self, s: &str) -> Sym {
        self.intern_hashed(s, text_hash(s))
    }

    /// [`Table::intern`] for `s` hashed `h` ([`text_hash`]) already.
    fn intern_hashed(&mut self, s: &str, h: u64) -> Sym {
        if let Some(id) = self.find(s, h) {
            return Sym(id);
        }
        let k = self.next;
        let Some(id) = k
            .checked_add(PREDEFINED.len() as u32)
            .filter(|&id| id < u32::MAX)
        else {
            // Four billion distinct names: past anything a model the loader admits can hold.
            return Sym::EMPTY;
        };
        let text = self.store(s);
        let (chunk, slot) = slot_of(k);
        let table = CHUNK_TABLE[chunk].get_or_init(|| {
            std::iter::repeat_with(|| (AtomicPtr::new(std::ptr::null_mut()), AtomicUsize::new(0)))
                .take(1usize << (chunk as u32 + FIRST_BITS))
                .collect()
        });
        if let Some((ptr, len)) = table.get(slot) {
            len.store(text.len(), Ordering::Relaxed);
            ptr.store(text.as_ptr().cast_mut(), Ordering::Release);
        }
        self.next = k + 1;
        self.ids().insert_unique(h, id);
        Sym(id)
    }
}

/// The hash the interner keys a text by: computed by whoever reads names in bulk, off the lock
/// ([`Interner::intern_hashed`]).
pub fn text_hash(s: &str) -> u64 {
    use std::hash::BuildHasher;
    rustc_hash::FxBuildHasher.hash_one(s)
}

fn interner() -> std::sync::MutexGuard<'static, Table> {
    // A panic while the lock was held leaves the table consistent (slots are set before the
    // map names them): the poison carries no broken invariant.
    INTERNER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The table held for a batch of interning (the session builder interns every name of a graph
/// under one lock instead of one per name). Other threads that intern wait until it is dropped;
/// reading texts never waits.
pub struct Interner(std::sync::MutexGuard<'static, Table>);

impl Interner {
    pub fn lock() -> Interner {
        Interner(interner())
    }

    /// Makes room for `n` more names (a graph's worth), so that the table does not grow name
    /// by name.
    pub fn reserve(&mut self, n: usize) {
        self.0.reserve(n);
    }

    /// [`Sym::new`] under the held lock.
    pub fn intern(&mut self, s: &str) -> Sym {
        if s.is_empty() {
            return Sym::EMPTY;
        }
        self.0.intern(s)
    }

    /// Asks for where a name hashed `h` ([`text_hash`]) is looked up to be brought into the
    /// cache: a reader interning many names calls it a few names ahead.
    pub fn prefetch(&mut self, h: u64) {
        if let Some(t) = self.0.ids.as_ref() {
            t.prefetch(h);
        }
    }

    /// [`Interner::intern`] of `s`, whose [`text_hash`] is `h` (a wrong `h` would intern `s`
    /// again under a new id: callers pass what `text_hash` gave).
    pub fn intern_hashed(&mut self, s: &str, h: u64) -> Sym {
        if s.is_empty() {
            return Sym::EMPTY;
        }
        self.0.intern_hashed(s, h)
    }
}

/// One past the highest id handed out so far: every `Sym` existing now has `id() < ids()`.
pub fn ids() -> usize {
    PREDEFINED.len() + interner().next as usize
}

impl Sym {
    /// The sym of `s`, interning it on first sight.
    pub fn new(s: &str) -> Sym {
        if s.is_empty() {
            return Sym::EMPTY;
        }
        interner().intern(s)
    }

    /// The sym of `s` if it was ever interned (without interning it).
    pub fn get(s: &str) -> Option<Sym> {
        if s.is_empty() {
            return Some(Sym::EMPTY);
        }
        interner().find(s, text_hash(s)).map(Sym)
    }

    /// The text.
    pub fn as_str(self) -> &'static str {
        let id = self.0 as usize;
        if let Some(s) = PREDEFINED.get(id) {
            return s;
        }
        let (chunk, slot) = slot_of(self.0 - PREDEFINED.len() as u32);
        let Some((ptr, len)) = CHUNK_TABLE[chunk].get().and_then(|c| c.get(slot)) else {
            return "";
        };
        let ptr = ptr.load(Ordering::Acquire);
        if ptr.is_null() {
            return "";
        }
        // SAFETY: a non-null address was stored (with `Release`, after the length) from a
        // `&'static str` the interner leaked and never frees or writes again: `len` bytes of
        // UTF-8 at `ptr`, valid for the rest of the process. The `Acquire` load above makes
        // the length stored before it visible.
        unsafe {
            std::str::from_utf8_unchecked(std::slice::from_raw_parts(
                ptr,
                len.load(Ordering::Relaxed),
            ))
        }
    }

    /// The empty name (an omitted optional input or output).
    pub fn is_empty(&self) -> bool {
        *self == Sym::EMPTY
    }

    /// The id (stable for the life of the process; not an order of the texts).
    pub fn id(self) -> u32 {
        self.0
    }
}

impl Default for Sym {
    fn default() -> Sym {
        Sym::EMPTY
    }
}

impl Deref for Sym {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for Sym {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl Ord for Sym {
    fn cmp(&self, other: &Sym) -> std::cmp::Ordering {
        if self == other {
            return std::cmp::Ordering::Equal;
        }
        self.as_str().cmp(other.as_str())
    }
}

impl PartialOrd for Sym {
    fn partial_cmp(&self, other: &Sym) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Sym {
        Sym::new(s)
    }
}

impl From<&String> for Sym {
    fn from(s: &String) -> Sym {
        Sym::new(s)
    }
}

impl From<String> for Sym {
    fn from(s: String) -> Sym {
        Sym::new(&s)
    }
}

impl From<Sym> for String {
    fn from(s: Sym) -> String {
        s.as_str().to_string()
    }
}

impl PartialEq<str> for Sym {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for Sym {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for Sym {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<Sym> for str {
    fn eq(&self, other: &Sym) -> bool {
        self == other.as_str()
    }
}

impl PartialEq<Sym> for &str {
    fn eq(&self, other: &Sym) -> bool {
        *self == other.as_str()
    }
}

impl PartialEq<Sym> for String {
    fn eq(&self, other: &Sym) -> bool {
        self == other.as_str()
    }
}

impl serde::Serialize for Sym {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sym_hash(id: u32) -> u64 {
        use std::hash::BuildHasher;
        BuildSymHasher.hash_one(Sym(id))
    }

    #[test]
    fn syms_hash_to_their_ids_below_a_mixed_tag() {
        let low = |h: u64| h & ((1 << 57) - 1);
        for id in [0u32, 1, 4095, 1 << 16, 7 << 20, u32::MAX] {
            assert_eq!(low(sym_hash(id)), u64::from(id));
        }
        // Consecutive ids: consecutive buckets, whatever the table's size.
        for k in 0..1000u32 {
            assert_eq!(sym_hash(5000 + k) & 1023, u64::from((5000 + k) & 1023));
        }
        // The bits hashbrown's probe compares (the top 7) are not all alike.
        let tags: std::collections::HashSet<u64> = (0..128u32).map(|k| sym_hash(k) >> 57).collect();
        assert!(tags.len() > 64, "{} distinct tags", tags.len());
        // A (graph, node) key: the node's index, offset per graph.
        use std::hash::BuildHasher;
        let node = |g: usize, n: usize| BuildSymHasher.hash_one((g, n)) & ((1 << 57) - 1);
        for n in 0..1000usize {
            assert_eq!(node(0, n), n as u64);
            assert_eq!(node(3, n + 1), node(3, n) + 1);
        }
        assert_ne!(node(1, 0), node(0, 0));
        // Any other key is hashed as by FxHasher.
        assert_eq!(
            BuildSymHasher.hash_one((Sym(3), Sym(4))),
            rustc_hash::FxBuildHasher.hash_one((Sym(3), Sym(4)))
        );
    }

    #[test]
    fn a_large_table_is_free_wherever_it_was_written() {
        let n = PARALLEL_FREE_SLOTS + 12_345;
        let slots = free_slots(n);
        assert_eq!(slots.len(), n);
        assert!(slots.iter().all(|e| *e == FREE));
    }

    #[test]
    fn the_text_table_grows_and_keeps_every_name() {
        // Past several doublings of the table, names interned with and without a reserved
        // size, their hashes given or not, and slots asked for ahead.
        let names: Vec<String> = (0..50_000).map(|k| format!("probe/table/{k}")).collect();
        let mut syms = Vec::new();
        {
            let mut t = Interner::lock();
            for (k, n) in names.iter().enumerate() {
                if let Some(next) = names.get(k + 4) {
                    t.prefetch(text_hash(next));
                }
                syms.push(if k % 2 == 0 {
                    t.intern(n)
                } else {
                    t.intern_hashed(n, text_hash(n))
                });
            }
        }
        for (n, s) in names.iter().zip(&syms) {
            assert_eq!(s.as_str(), n);
            assert_eq!(Sym::new(n), *s);
            assert_eq!(Sym::get(n), Some(*s));
        }
        let distinct: std::collections::HashSet<Sym> = syms.iter().copied().collect();
        assert_eq!(distinct.len(), names.len());
        assert_eq!(Sym::get("probe/table/not interned"), None);
    }

    #[test]
    fn equal_texts_are_equal_syms() {
        let a = Sym::new("onnx::MatMul_1234");
        let b = Sym::new(&String::from("onnx::MatMul_1234"));
        assert_eq!(a, b);
        assert_eq!(a.as_str(), "onnx::MatMul_1234");
        assert_ne!(a, Sym::new("onnx::MatMul_1235"));
        assert_eq!(Sym::new(""), Sym::EMPTY);
        assert!(Sym::EMPTY.is_empty());
        assert_eq!(Sym::AI_ONNX, Sym::AI_ONNX);
        assert_eq!(Sym::AI_ONNX.as_str(), "ai.onnx");
        assert_eq!(a, "onnx::MatMul_1234");
        assert_eq!(Sym::get("onnx::MatMul_1234"), Some(a));
        assert_eq!(Sym::get("never interned: 7f3a"), None);
    }

    #[test]
    fn order_is_the_texts() {
        let mut v = [Sym::new("b"), Sym::new("a"), Sym::new("c"), Sym::new("")];
        v.sort();
        let texts: Vec<&str> = v.iter().map(|s| s.as_str()).collect();
        assert_eq!(texts, ["", "a", "b", "c"]);
    }

    #[test]
    fn slots_cover_the_id_space() {
        assert_eq!(slot_of(0), (0, 0));
        assert_eq!(slot_of(1023), (0, 1023));
        assert_eq!(slot_of(1024), (1, 0));
        assert_eq!(slot_of(1024 + 2047), (1, 2047));
        assert_eq!(slot_of(1024 + 2048), (2, 0));
        let (c, s) = slot_of(u32::MAX - 1);
        assert!(c < CHUNKS && s < (1usize << (c as u32 + FIRST_BITS)));
    }

    #[test]
    fn many_names_across_chunks_and_long_names_keep_their_texts() {
        let syms: Vec<Sym> = (0..5000).map(|i| Sym::new(&format!("v{i}"))).collect();
        let long = "x".repeat(BLOCK);
        let l = Sym::new(&long);
        for (i, s) in syms.iter().enumerate() {
            assert_eq!(s.as_str(), format!("v{i}"));
        }
        assert_eq!(l.as_str(), long);
    }

    #[test]
    fn threads_agree_on_ids() {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    (0..2000)
                        .map(|i| Sym::new(&format!("t{i}")))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let all: Vec<Vec<Sym>> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
        assert_eq!(all.len(), 4);
        for v in &all[1..] {
            assert_eq!(v, &all[0]);
        }
        for (i, s) in all[0].iter().enumerate() {
            assert_eq!(s.as_str(), format!("t{i}"));
        }
    }
}

/// The hasher of maps keyed by [`Sym`]. A key hashed as one `u32` (a sym) hashes to its id,
/// with only the top bits (the tag hashbrown compares while probing) mixed: the bucket of a name
/// is its id modulo the table's size. A model's values are interned in file order and visited
/// in about that order, so lookups walk the table (and its page-table entries) instead of
/// jumping through it, and the ids of one model, dense, tile the table with no two in one home
/// bucket until they wrap around it. A node's key (`session::NodeRef`, hashed as its graph's and
/// its own index, two `usize`s) hashes the same way to the node's index, offset by a multiple of
/// the graph's. Any other key is
/// hashed by `FxHasher`.
///
/// No model can make a map slow past its size: `n` keys share a home bucket only if their ids
/// are equal modulo a table of at least `n` buckets, so the names they stand among number `n`
/// times the table's size; probing then costs at most about the names interned, and a model's
/// names are bounded by its file (and its analysis by the time limit, `cli/budget.rs`).
///
/// `place` at `all`, `FxHasher` on every map -> this hasher, same output on every fixture
/// (2-core development machine): the 100k-node bench decoder 0.50 -> 0.35 s, 1M nodes 5.7 ->
/// 4.0 s. Hashes that scatter blocks of ids (random offsets per 2^16 ids, or low bits permuted
/// per block) measured 4.3-5.0 s at 1M: blocks overlapping in a table they fill.
#[derive(Clone, Copy, Default, Debug)]
pub struct BuildSymHasher;

/// See [`BuildSymHasher`].
#[derive(Default)]
pub struct SymHasher {
    fx: rustc_hash::FxHasher,
    /// The one `u32` written so far, while it is the only write.
    only: Option<u32>,
    /// The `usize`s written, while they are the only writes (a node's `(graph, node)`).
    pair: [usize; 2],
    writes: u32,
    usizes: u32,
}

impl std::hash::BuildHasher for BuildSymHasher {
    type Hasher = SymHasher;
    fn build_hasher(&self) -> SymHasher {
        SymHasher::default()
    }
}

impl std::hash::Hasher for SymHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.writes = self.writes.saturating_add(2);
        self.fx.write(bytes);
    }
    fn write_usize(&mut self, i: usize) {
        if let Some(slot) = self.pair.get_mut(self.usizes as usize) {
            *slot = i;
        }
        self.usizes = self.usizes.saturating_add(1);
        self.writes = self.writes.saturating_add(1);
        self.fx.write_usize(i);
    }
    fn write_u32(&mut self, i: u32) {
        self.writes = self.writes.saturating_add(1);
        self.only = Some(i);
        self.fx.write_u32(i);
    }
    fn finish(&self) -> u64 {
        match (self.writes, self.only) {
            (1, Some(i)) => in_order(u64::from(i)),
            // A `(graph, node)` key: the node's index, offset per graph (the main graph's
            // nodes, visited in order, walk the table as syms do).
            (2, _) if self.usizes == 2 => {
                let [g, n] = self.pair.map(|v| v as u64);
                in_order(n.wrapping_add(g.wrapping_mul(0x9E37_79B1)))
            }
            _ => self.fx.finish(),
        }
    }
}

/// `i` itself below hashbrown's tag (the top 7 bits), the tag mixed from it.
fn in_order(i: u64) -> u64 {
    const TAG: u64 = !0 << 57;
    (i & !TAG) | (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) & TAG)
}

/// A hash map with [`BuildSymHasher`].
pub type SymMap<K, V> = std::collections::HashMap<K, V, BuildSymHasher>;
/// A hash set with [`BuildSymHasher`].
pub type SymSet<K> = std::collections::HashSet<K, BuildSymHasher>;
