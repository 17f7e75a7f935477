//! airlock's memory allocator: blocks of up to 4 KiB come from a fixed region in .bss, kept on
//! one free list per power-of-two size and reused; anything larger, and whatever the region
//! cannot hold, comes from the C library's malloc.
//!
//! Why: a launch makes about 700 small allocations. musl's malloc gives each group of them
//! pages of their own and hands the pages back as soon as the group empties: a launch made 51
//! mmap and 41 munmap calls and their page faults, against 9 and 2 with glibc's malloc (whose
//! start-up, in turn, costs a launch about 1 ms; see scripts/target.sh). With this region a
//! musl launch makes none of them.
//!
//! Only the main thread uses the region: `claim_for_this_thread` marks it (sys::main calls it
//! first thing; only the first call in a process claims), and processes cloned from it copy
//! the mark with the rest of its memory. Any other thread (the demo's loopback server)
//! allocates from the C library, and a region block it frees is left unused. So the region
//! needs no lock, and a process cloned while another thread allocates still inherits a
//! consistent region. A task started with CLONE_VM|CLONE_VFORK shares the region with its
//! parent, which stays stopped until the task execs or exits; every change to the pool is one
//! store, so the parent always finds it consistent. airlock installs no signal handler (it
//! reads signals from a signalfd), so the allocator is never reentered. The region's pages
//! count towards RSS only once touched.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Block sizes 16, 32, ..., 4096 bytes: one free list each. (Classes up to 64 KiB saved no
/// time measurably, and raised the peak RSS of a launch by 190 KiB: the C library returns
/// such blocks to the kernel when freed, the region keeps them.)
const CLASSES: usize = 9;
const SMALLEST: usize = 16;
const LARGEST: usize = SMALLEST << (CLASSES - 1);
/// The region's size. A launch uses about 100 KiB of it; a run with thousands of result files
/// may need more, and then the C library serves the rest. The gaps left by aligning a block
/// to its size are never touched, so they cost address space, not memory.
const REGION: usize = 4 << 20;

/// The free list (0 for none) and the size class of a layout, if the region serves it.
fn class(layout: Layout) -> Option<usize> {
    let size = layout.size().max(layout.align()).max(SMALLEST);
    (size <= LARGEST).then(|| (size.next_power_of_two() / SMALLEST).trailing_zeros() as usize)
}

/// The allocator's state over a region of memory it is given: where the unused part starts, and
/// the head of each size's free list. A free block holds the address of the next one.
struct Pool {
    /// Offset of the first byte never handed out.
    next: usize,
    /// Address of the first free block of each size, 0 for none.
    free: [usize; CLASSES],
}

impl Pool {
    const EMPTY: Pool = Pool {
        next: 0,
        free: [0; CLASSES],
    };

    /// A block of size class `c` from the region `base..base + len` (LARGEST-aligned, zeroed
    /// when first given), or None if the region is used up; and whether it was used before
    /// (else it still holds the region's zeroes). A block of size N is N-aligned.
    ///
    /// # Safety
    /// The caller owns the region, and the free lists hold only blocks of it that are not in
    /// use (as `free` puts them there).
    unsafe fn alloc(&mut self, base: usize, len: usize, c: usize) -> Option<(*mut u8, bool)> {
        let head = self.free[c];
        if head != 0 {
            // SAFETY: a free block of this size, at least 16 bytes and 16-aligned, holding the
            // address of the next free block (written by `free`).
            self.free[c] = unsafe { *(head as *const usize) };
            return Some((head as *mut u8, true));
        }
        let size = SMALLEST << c;
        let start = self.next.next_multiple_of(size);
        if start + size > len {
            return None;
        }
        self.next = start + size;
        Some(((base + start) as *mut u8, false))
    }

    /// Put block `p` of size class `c` on its free list.
    ///
    /// # Safety
    /// `p` came from `alloc` with the same `c`, and nothing uses it any more.
    unsafe fn free(&mut self, p: *mut u8, c: usize) {
        // SAFETY: the block is unused, at least 16 bytes and 16-aligned (caller).
        unsafe { *(p as *mut usize) = self.free[c] };
        self.free[c] = p as usize;
    }
}

/// The region, in .bss: no page of it is backed until touched.
#[repr(C, align(4096))]
struct Region(UnsafeCell<[u8; REGION]>);
/// The pool's state, used by the main thread alone (see the module's comment).
struct State(UnsafeCell<Pool>);

// SAFETY: only the thread marked by `claim_for_this_thread` touches either (checked by `mine`
// before every access); other threads only compare addresses against the region's bounds.
unsafe impl Sync for Region {}
// SAFETY: as for Region.
unsafe impl Sync for State {}

static MEMORY: Region = Region(UnsafeCell::new([0; REGION]));
static STATE: State = State(UnsafeCell::new(Pool::EMPTY));

thread_local! {
    /// Set on the one thread that may use the region.
    static MAIN: Cell<bool> = const { Cell::new(false) };
}
/// Whether a thread has claimed the region: only the first caller of `claim_for_this_thread`
/// gets it.
static CLAIMED: AtomicBool = AtomicBool::new(false);

/// Let this thread use the region, if no thread has claimed it yet (sys::main calls it first
/// thing, on the main thread). A later call, on any thread, changes nothing.
pub fn claim_for_this_thread() {
    if CLAIMED
        .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        .is_ok()
    {
        MAIN.set(true);
    }
}

fn base() -> usize {
    MEMORY.0.get() as usize
}

fn in_region(p: *mut u8) -> bool {
    (p as usize).wrapping_sub(base()) < REGION
}

/// The pool, if this thread may use it.
fn mine() -> Option<&'static mut Pool> {
    // SAFETY: only the marked thread gets the reference, and it never holds two at once: each
    // use below ends before the function that made it returns, and the allocator does not
    // reenter itself.
    MAIN.get().then(|| unsafe { &mut *STATE.0.get() })
}

/// How a failed allocation is told (set by main, `on_out_of_memory`): whether the caller reads
/// one JSON object on stdout, and which process is the launcher. The sandbox's init and the
/// launcher's helpers, clones of it, exit without a word: the launcher reports their failure.
static OOM_JSON: AtomicBool = AtomicBool::new(false);
static LAUNCHER: AtomicI32 = AtomicI32::new(0);

/// Make this process the one that reports running out of memory (sys::main, first thing).
#[cfg_attr(test, allow(dead_code))] // sys::main is not built for the unit tests
pub fn this_process_reports_out_of_memory() {
    // SAFETY: getpid takes no memory and cannot fail.
    LAUNCHER.store(unsafe { libc::getpid() }, Ordering::Relaxed);
}

/// A copy-on-write child of the launcher (the sandbox's init, a bwrap stage, a task before
/// its exec) reports nothing: its pid may equal the launcher's in another pid namespace (a
/// launcher that is pid 1 of a container, an init that is pid 1 of the sandbox's). Helpers
/// that share the launcher's memory (CLONE_VM) must not call it; their pid tells them apart.
pub fn not_the_reporting_process() {
    LAUNCHER.store(0, Ordering::Relaxed);
}

/// Say running out of memory as a JSON object on stdout too (`airlock run --json`, --request).
pub fn report_out_of_memory_as_json(json: bool) {
    OOM_JSON.store(json, Ordering::Relaxed);
}

/// A line built without allocating.
struct Line {
    buf: [u8; 256],
    len: usize,
}

impl Line {
    fn put(&mut self, b: &[u8]) -> &mut Line {
        let k = b.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + k].copy_from_slice(&b[..k]);
        self.len += k;
        self
    }

    fn number(&mut self, mut n: usize) -> &mut Line {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.put(&digits[at..])
    }

    fn write_to(&self, fd: libc::c_int) {
        // SAFETY: the buffer holds `len` initialized bytes; a failed write is left as it is.
        let _ = unsafe { libc::write(fd, self.buf.as_ptr().cast(), self.len) };
    }
}

/// An allocation the C library refused (an address-space or data limit, or the host's
/// memory): said in the caller's format (error kind `out_of_memory`: the task may have run,
/// as a JSON run's capture grows while it does), and exit 125, where std would abort
/// (SIGABRT, 134, no JSON). The sandbox, if started, ends with the launcher.
#[cold]
fn out_of_memory(size: usize) -> ! {
    // SAFETY: getpid takes no memory and cannot fail.
    let me = unsafe { libc::getpid() };
    if me == LAUNCHER.load(Ordering::Relaxed) {
        // The same words twice: `"{error}"` in the JSON object, after `airlock: ` on stderr.
        let said = |before: &[u8], after: &[u8], fd: libc::c_int| {
            let mut l = Line {
                buf: [0; 256],
                len: 0,
            };
            l.put(before)
                .put(b"out of memory: an allocation of ")
                .number(size)
                .put(b" bytes failed")
                .put(after)
                .write_to(fd);
        };
        if OOM_JSON.load(Ordering::Relaxed) {
            let after = b"\",\"error_kind\":\"out_of_memory\",\"exit_code\":125}\n";
            said(b"{\"error\":\"", after, 1);
        }
        said(
            b"airlock: ",
            b" (ulimit -v or -d, or the host's memory)\n",
            2,
        );
    }
    crate::sys::exit_now(crate::spec::exit::SETUP_FAILED)
}

/// `p`, unless it is null: then memory ran out.
fn or_out_of_memory(p: *mut u8, size: usize) -> *mut u8 {
    if p.is_null() {
        out_of_memory(size);
    }
    p
}

/// The global allocator (installed in main.rs).
pub struct Heap;

// SAFETY: blocks from the region are handed out at most once until freed (Pool), sized and
// aligned for their layout (`class`); everything else is the C library's malloc.
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if let (Some(c), Some(pool)) = (class(layout), mine()) {
            // SAFETY: the region is the pool's alone.
            if let Some((p, _)) = unsafe { pool.alloc(base(), REGION, c) } {
                return p;
            }
        }
        // SAFETY: a valid layout of non-zero size (GlobalAlloc's contract).
        or_out_of_memory(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if let (Some(c), Some(pool)) = (class(layout), mine()) {
            // SAFETY: the region is the pool's alone.
            if let Some((p, reused)) = unsafe { pool.alloc(base(), REGION, c) } {
                if reused {
                    // SAFETY: the block has room for `layout.size()` bytes.
                    unsafe { p.write_bytes(0, layout.size()) };
                }
                return p;
            }
        }
        // SAFETY: as for alloc. Large zeroed buffers come from calloc, which gets fresh pages
        // from the kernel already zeroed, without touching them.
        or_out_of_memory(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if in_region(p) {
            // A block of the region, from `alloc` with this layout, so `class` is Some. On
            // another thread it is left unused.
            if let (Some(c), Some(pool)) = (class(layout), mine()) {
                // SAFETY: the caller frees it: nothing uses it any more.
                unsafe { pool.free(p, c) };
            }
            return;
        }
        // SAFETY: not in the region, so from System with this layout.
        unsafe { System.dealloc(p, layout) }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if !in_region(p) {
            // SAFETY: from System with this layout (as in dealloc); the caller keeps
            // realloc's contract.
            return or_out_of_memory(unsafe { System.realloc(p, layout, new_size) }, new_size);
        }
        // SAFETY: `new_size`, rounded up to `layout.align()`, does not overflow (realloc's
        // contract).
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        if class(new_layout) == class(layout) {
            return p; // the block has room
        }
        // SAFETY: as for alloc.
        let q = unsafe { self.alloc(new_layout) };
        if !q.is_null() {
            // SAFETY: both blocks hold at least the smaller size, and are distinct.
            unsafe { std::ptr::copy_nonoverlapping(p, q, layout.size().min(new_size)) };
            // SAFETY: `p` is the caller's to free, now copied.
            unsafe { self.dealloc(p, layout) };
        }
        q
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_cover_size_and_alignment() {
        let l = |size, align| Layout::from_size_align(size, align).unwrap();
        assert_eq!(class(l(1, 1)), Some(0));
        assert_eq!(class(l(16, 8)), Some(0));
        assert_eq!(class(l(17, 1)), Some(1));
        assert_eq!(class(l(8, 64)), Some(2));
        assert_eq!(class(l(4096, 8)), Some(8));
        assert_eq!(class(l(4097, 8)), None);
        assert_eq!(class(l(8, 8192)), None);
    }

    /// Many blocks of mixed sizes, freed and reused: each is aligned to its size, inside the
    /// region, and never overlaps another live block (checked through a byte pattern).
    #[test]
    fn blocks_are_aligned_disjoint_and_reused() {
        #[repr(align(4096))]
        struct Mem([u8; 256 << 10]);
        let mut mem = Box::new(Mem([0; 256 << 10]));
        let base = mem.0.as_mut_ptr() as usize;
        let len = mem.0.len();
        let mut pool = Pool::EMPTY;
        let mut live: Vec<(*mut u8, usize, u8)> = Vec::new();
        let mut seed = 7u32;
        let mut rand = || {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            seed >> 8
        };
        for round in 0..4000u32 {
            let c = (rand() % CLASSES as u32) as usize;
            if live.len() > 64 || (rand() % 3 == 0 && !live.is_empty()) {
                let (p, c, tag) = live.swap_remove((rand() as usize) % live.len());
                let size = SMALLEST << c;
                // SAFETY: the block is live and `size` bytes long.
                let bytes = unsafe { std::slice::from_raw_parts(p, size) };
                assert!(bytes.iter().all(|&b| b == tag), "a block was overwritten");
                // SAFETY: from pool.alloc with this class, no longer used.
                unsafe { pool.free(p, c) };
                continue;
            }
            // SAFETY: the pool owns `mem` alone.
            let Some((p, _)) = (unsafe { pool.alloc(base, len, c) }) else {
                continue;
            };
            let size = SMALLEST << c;
            assert_eq!(p as usize % size, 0, "block of {size} misaligned");
            assert!(p as usize >= base && p as usize + size <= base + len);
            let tag = (round % 251) as u8 + 1;
            // SAFETY: a fresh block of `size` bytes.
            unsafe { p.write_bytes(tag, size) };
            live.push((p, c, tag));
        }
        assert!(pool.next < len, "freed blocks were not reused");
    }

    /// The installed allocator, on the one thread that claims the region (no other test
    /// does): small blocks come from the region and are reused, large ones do not, contents
    /// survive every realloc, alloc_zeroed gives zeroes, a second claim is refused, and blocks
    /// freed on another thread are never handed out again.
    #[test]
    fn the_claiming_thread_allocates_from_the_region() {
        let elsewhere = std::thread::spawn(|| {
            let b = Box::new([1u8; 100]);
            in_region(b.as_ptr() as *mut u8)
        });
        assert!(
            !elsewhere.join().unwrap(),
            "an unclaimed thread got a region block"
        );
        let freed_elsewhere = std::thread::spawn(|| {
            claim_for_this_thread();
            let small = Box::new([7u8; 100]);
            let at = small.as_ptr() as usize;
            assert!(in_region(at as *mut u8));
            drop(small);
            let again = Box::new([9u8; 120]);
            assert_eq!(
                again.as_ptr() as usize,
                at,
                "a freed block of the size was not reused"
            );
            assert!(!in_region(vec![0u8; 8192].as_ptr() as *mut u8));
            stress_through_the_allocator();
            // Region blocks handed to a thread that frees them there.
            let l = Layout::from_size_align(64, 8).unwrap();
            let blocks: Vec<usize> = (0..50)
                // SAFETY: a valid layout; each block is freed once, below.
                .map(|_| unsafe { Heap.alloc(l) } as usize)
                .collect();
            assert!(blocks.iter().all(|&p| in_region(p as *mut u8)));
            let sent = blocks.clone();
            std::thread::spawn(move || {
                claim_for_this_thread(); // refused: the region is claimed already
                let mine = Box::new([3u8; 64]);
                assert!(!in_region(mine.as_ptr() as *mut u8));
                for p in sent {
                    // SAFETY: allocated above with `l`, freed once.
                    unsafe { Heap.dealloc(p as *mut u8, l) };
                }
            })
            .join()
            .unwrap();
            blocks
        })
        .join()
        .unwrap();
        // The claiming thread has ended; its pool must not have taken those blocks back.
        // SAFETY: the pool's state, read after the only thread that used it has ended.
        let pool = unsafe { &*STATE.0.get() };
        let mut free = Vec::new();
        for &head in &pool.free {
            let mut p = head;
            while p != 0 {
                free.push(p);
                // SAFETY: a free block holds the address of the next one.
                p = unsafe { *(p as *const usize) };
            }
        }
        assert!(
            freed_elsewhere.iter().all(|p| !free.contains(p)),
            "a block freed on another thread went back on a free list"
        );
    }

    /// Random alloc, alloc_zeroed, realloc and dealloc through `Heap` (sizes 1-6000 bytes,
    /// alignments 1-128), each live block filled with its own byte and checked before it
    /// changes: an overlap, a realloc that keeps too small a block, or a lost copy shows.
    fn stress_through_the_allocator() {
        let mut seed = 99u32;
        let mut rand = move |n: u32| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (seed >> 8) % n
        };
        let check = |p: *mut u8, size: usize, tag: u8| {
            // SAFETY: a live block of at least `size` bytes.
            let bytes = unsafe { std::slice::from_raw_parts(p, size) };
            assert!(bytes.iter().all(|&b| b == tag), "a block was overwritten");
        };
        let mut live: Vec<(*mut u8, Layout, u8)> = Vec::new();
        for round in 0..20_000u32 {
            let tag = (round % 251) as u8 + 1;
            // At most 300 live blocks: the region must last for the checks after this.
            let op = if live.len() >= 300 { 0 } else { rand(4) };
            match op {
                0 if !live.is_empty() => {
                    let (p, l, t) = live.swap_remove(rand(live.len() as u32) as usize);
                    check(p, l.size(), t);
                    // SAFETY: allocated with `l`, freed once.
                    unsafe { Heap.dealloc(p, l) };
                }
                1 if !live.is_empty() => {
                    let k = rand(live.len() as u32) as usize;
                    let (p, l, t) = live[k];
                    check(p, l.size(), t);
                    let size = 1 + rand(6000) as usize;
                    // SAFETY: allocated with `l`; a valid new size.
                    let q = unsafe { Heap.realloc(p, l, size) };
                    assert!(!q.is_null());
                    assert_eq!(q as usize % l.align(), 0, "realloc lost the alignment");
                    check(q, l.size().min(size), t);
                    // SAFETY: the new block holds `size` bytes.
                    unsafe { q.write_bytes(tag, size) };
                    live[k] = (q, Layout::from_size_align(size, l.align()).unwrap(), tag);
                }
                op => {
                    let l = Layout::from_size_align(1 + rand(6000) as usize, 1 << rand(8)).unwrap();
                    // SAFETY: a valid layout of non-zero size.
                    let p = unsafe {
                        if op == 2 {
                            Heap.alloc_zeroed(l)
                        } else {
                            Heap.alloc(l)
                        }
                    };
                    assert!(!p.is_null());
                    assert_eq!(p as usize % l.align(), 0, "block misaligned");
                    if op == 2 {
                        check(p, l.size(), 0);
                    }
                    // SAFETY: a fresh block of `l.size()` bytes.
                    unsafe { p.write_bytes(tag, l.size()) };
                    live.push((p, l, tag));
                }
            }
        }
        for (p, l, t) in live {
            check(p, l.size(), t);
            // SAFETY: allocated with `l`, freed once.
            unsafe { Heap.dealloc(p, l) };
        }
    }

    #[test]
    fn an_exhausted_region_says_so() {
        #[repr(align(4096))]
        struct Mem([u8; 8192]);
        let mut mem = Mem([0; 8192]);
        let base = mem.0.as_mut_ptr() as usize;
        let mut pool = Pool::EMPTY;
        // SAFETY: the pool owns `mem` alone.
        unsafe {
            assert!(pool.alloc(base, 8192, 8).is_some());
            assert!(pool.alloc(base, 8192, 8).is_some());
            assert!(pool.alloc(base, 8192, 8).is_none());
            assert!(pool.alloc(base, 8192, 0).is_none());
        }
    }
}
