//! The tests' global allocator: the system's, counting per thread the allocations and the
//! live and peak bytes, so that a test measures what its own thread allocates while the
//! binary's other tests run beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCATIONS: Cell<usize> = const { Cell::new(0) };
    // (Signed: a thread may free what another allocated.)
    static LIVE: Cell<isize> = const { Cell::new(0) };
    static PEAK: Cell<isize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; the counters are const-initialised
// thread-locals without destructors, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
        let live = LIVE.with(|l| {
            l.set(l.get() + layout.size() as isize);
            l.get()
        });
        PEAK.with(|p| p.set(p.get().max(live)));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.with(|l| l.set(l.get() - layout.size() as isize));
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// How many allocations this thread made while `f` ran.
pub fn allocations_during(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.with(Cell::get);
    f();
    ALLOCATIONS.with(Cell::get) - before
}

/// `f`'s result, and the most bytes this thread held at once while it ran, beyond what
/// it held before.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let baseline = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(baseline));
    let value = f();
    let peak = PEAK.with(Cell::get) - baseline;
    (value, usize::try_from(peak).unwrap_or(0))
}
