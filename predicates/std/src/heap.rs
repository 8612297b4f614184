//! The module's allocator. Every call runs in a fresh instance that the judge resets when the
//! call ends, so memory freed during a call is hardly worth reusing: the first
//! [`ARENA_BUDGET`] bytes are handed out by bumping a pointer (freeing only gives back the most
//! recent block, and the most recent block grows in place), and only a call that needs more
//! than that is served by talc, which reuses what is freed. A typical bundle's call allocates
//! well under a megabyte in all, which `build.rs` puts in the memory the module starts with.
//!
//! Everything the arena hands out lies below everything talc does: talc is used only once
//! the arena is closed, and it takes its memory from pages grown after the arena's.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::wasm32::{memory_grow, memory_size};
use core::cell::UnsafeCell;
use core::ptr::NonNull;

use talc::base::Talc;
use talc::base::binning::Binning;
use talc::cell::TalcSyncCell;
use talc::wasm::WasmBinning;

const PAGE: usize = 65536;

/// The most the arena hands out before talc takes over: many times what a typical call
/// allocates, and a small part of the least memory the judge gives a call (128 MiB), so a call
/// that allocates and frees over and over keeps nearly all of its memory for talc to reuse.
const ARENA_BUDGET: usize = 8 << 20;

/// The least the arena grows memory by, so that growing (which costs the judge a change of
/// page protections) is rare.
const ARENA_GROWTH: usize = 1 << 20;

unsafe extern "C" {
    /// The end of static data and stack, set by the linker: the heap may start here.
    static __heap_base: u8;
}

/// The bump arena: `[start, top)` is handed out, `[top, end)` is free, and `end` is the end
/// of memory until the arena closes.
struct Arena {
    start: usize,
    top: usize,
    end: usize,
    /// Where the most recent block starts (`usize::MAX` when it was freed).
    last: usize,
    closed: bool,
}

impl Arena {
    /// Makes `[top, new_top)` usable, growing memory if needed; false when it cannot.
    fn reach(&mut self, new_top: usize) -> bool {
        if new_top <= self.end {
            return true;
        }
        if new_top - self.start > ARENA_BUDGET {
            return false;
        }
        let pages = (new_top - self.end).max(ARENA_GROWTH).div_ceil(PAGE);
        if memory_grow(0, pages) == usize::MAX {
            return false;
        }
        self.end += pages * PAGE;
        true
    }

    /// Hands out a block, or `None` when the arena is (now) closed.
    fn bump(&mut self, layout: Layout) -> Option<*mut u8> {
        if self.closed {
            return None;
        }
        if self.start == 0 {
            self.start = (&raw const __heap_base) as usize;
            self.top = self.start;
            self.end = memory_size(0) * PAGE;
        }
        let at = self.top.checked_next_multiple_of(layout.align());
        match at.and_then(|at| Some((at, at.checked_add(layout.size())?))) {
            Some((at, new_top)) if self.reach(new_top) => {
                self.top = new_top;
                self.last = at;
                Some(at as *mut u8)
            }
            // Closed for good, whatever the reason: talc's pages will follow the arena's end.
            _ => {
                self.closed = true;
                None
            }
        }
    }

    /// Whether `ptr` was handed out by the arena.
    fn owns(&self, ptr: *mut u8) -> bool {
        (ptr as usize) < self.end
    }
}

/// Talc's memory: pages grown on the end of memory, after the arena's.
#[derive(Debug)]
pub struct Grown {
    end: Option<NonNull<u8>>,
}

// SAFETY: `acquire` hands talc only pages just grown, which nothing else uses, and touches
// nothing but the `talc` it is given.
unsafe impl talc::source::Source for Grown {
    fn acquire<B: Binning>(talc: &mut Talc<Self, B>, layout: Layout) -> Result<(), ()> {
        // Enough for this allocation with talc's bookkeeping, at least 4 pages.
        let pages = (layout.size() + layout.align() + 256).div_ceil(PAGE).max(4);
        let previous = memory_grow(0, pages);
        if previous == usize::MAX {
            return Err(());
        }
        let base = (previous * PAGE) as *mut u8;
        let new_end = base.wrapping_add(pages * PAGE);
        talc.source.end = match talc.source.end.take() {
            // SAFETY: the grown pages follow talc's heap directly and are unused.
            Some(old) if old.as_ptr() == base => Some(unsafe { talc.extend(old, new_end) }),
            // SAFETY: the grown pages are unused.
            _ => unsafe { talc.claim(base, pages * PAGE) },
        };
        talc.source.end.map(|_| ()).ok_or(())
    }
}

/// The arena, then talc.
pub struct ArenaThenTalc {
    arena: UnsafeCell<Arena>,
    talc: TalcSyncCell<Grown, WasmBinning>,
}

// SAFETY: the module is single-threaded WebAssembly (no `atomics`), where nothing runs
// concurrently with an allocation.
unsafe impl Sync for ArenaThenTalc {}

impl ArenaThenTalc {
    /// An allocator that has handed out nothing yet; the arena finds its start on first use.
    pub const fn new() -> Self {
        ArenaThenTalc {
            arena: UnsafeCell::new(Arena { start: 0, top: 0, end: 0, last: usize::MAX, closed: false }),
            talc: TalcSyncCell::new_wasm(Grown { end: None }),
        }
    }

    #[allow(clippy::mut_from_ref)]
    fn arena(&self) -> &mut Arena {
        // SAFETY: single-threaded, and no reference outlives the allocator call that made it.
        unsafe { &mut *self.arena.get() }
    }
}

// SAFETY: the arena's blocks are disjoint (the top only moves down past a block freed last)
// and lie below every block of talc's, so each pointer goes back to whoever made it.
unsafe impl GlobalAlloc for ArenaThenTalc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match self.arena().bump(layout) {
            Some(p) => p,
            // SAFETY: forwarded from the caller.
            None => unsafe { self.talc.alloc(layout) },
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        let arena = self.arena();
        if !arena.owns(ptr) {
            // SAFETY: forwarded from the caller; talc made this block.
            return unsafe { self.talc.dealloc(ptr, layout) };
        }
        if ptr as usize == arena.last && arena.last + layout.size() == arena.top {
            arena.top = arena.last;
            arena.last = usize::MAX;
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let arena = self.arena();
        if !arena.owns(ptr) {
            // SAFETY: forwarded from the caller; talc made this block.
            return unsafe { self.talc.realloc(ptr, layout, new_size) };
        }
        if new_size <= layout.size() {
            if ptr as usize == arena.last {
                arena.top = arena.last + new_size;
            }
            return ptr;
        }
        // The most recent block grows where it is.
        if !arena.closed && ptr as usize == arena.last {
            if let Some(new_top) = arena.last.checked_add(new_size).filter(|&t| arena.reach(t)) {
                arena.top = new_top;
                return ptr;
            }
        }
        // SAFETY: the alignment is the caller's valid one and `new_size` is no smaller than a
        // size that already fit a layout of it.
        let new_layout = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: a valid, non-zero-sized layout.
        let new = unsafe { self.alloc(new_layout) };
        if !new.is_null() {
            // SAFETY: both blocks are live and distinct; the old one holds `layout.size()` bytes.
            unsafe {
                core::ptr::copy_nonoverlapping(ptr, new, layout.size());
                self.dealloc(ptr, layout);
            }
        }
        new
    }
}
