//! Writer threads: the pool a write pass runs on, and how its threads share the
//! pass's packets.
//!
//! A pass's packets come in groups of connections in step, each group's packets
//! together, its leader first (see `in_groups`): the leader writes an objects section
//! its followers replay. A pass is cut into heads and rests ([`cut`]): a head is a run
//! of small groups, whole, or a larger group's leader with the followers right after
//! it; the rest of a larger group is cut into chunks. The threads take heads, the
//! calling thread from the front (the largest groups), the others from the back. A
//! thread that wrote a head goes on with the rest of its group, chunk by chunk, and a
//! thread out of heads steals such chunks from the back, adopting the leader's trace
//! and how the leader's catching up moved the group's shared copies (which the head's
//! thread publishes right after the leader's packet). So every leader is written
//! before its followers, most followers replay on their leader's core, and the
//! threads end within a small chunk of each other.
//!
//! The pool's threads stay awake for a while after a pass ([`KEEP_AWAKE`]), so the
//! tick's next pass finds them running: waking a parked thread takes tens of
//! microseconds, as long as a leader's section.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// How long the pool's threads stay awake after a pass, waiting for the next one: a
/// little longer than what a tick does between two passes (settling the pass, sending
/// its packets). [`WriterPool::release`] lets them sleep sooner.
pub const KEEP_AWAKE: Duration = Duration::from_millis(1);

/// The fewest packets of a pass whose connections are all in one group (in step)
/// that the other writer threads are woken for. With one group the other threads can
/// only replay its leader's section once it is written (most of the pass: S2, all in
/// scope, 100 connections, about 110 µs of the leader's against 0.5 µs a replay), and a
/// replay on another core costs about 1.8 times one on the leader's (the follower's
/// state and the group's copies are read cold there); below about 150 packets the
/// hand-offs cost more than the replays they take (S2, all in scope on two cores:
/// 0.9× the speed of one thread at 100 connections, 1.06× at 200, 1.28× at 400). A
/// pass with another group, which a thread writes beside the first, always wakes
/// them.
pub(crate) const MIN_PACKETS_IN_STEP_FOR_THREADS: usize = 160;

/// Chunks per writer thread a write pass is cut into, about (see [`cut`]).
const CHUNKS_PER_THREAD: usize = 8;

/// The writer threads besides the calling one, kept awake between a tick's passes.
pub(crate) struct WriterPool {
    threads: rayon::ThreadPool,
    /// Passes begun and releases: a thread kept awake stops when it changes.
    passes: Arc<AtomicU64>,
}

impl WriterPool {
    /// A pool of `threads` threads, or `None` when the system will not start them.
    pub(crate) fn new(threads: usize) -> Option<Self> {
        let threads = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|k| format!("replicate-writer-{}", k + 1))
            .build()
            .ok()?;
        Some(Self {
            threads,
            passes: Arc::default(),
        })
    }

    /// Lets the threads kept awake after a pass sleep: the tick writes no other.
    pub(crate) fn release(&self) {
        self.passes.fetch_add(1, Ordering::Release);
    }

    /// Runs `f` in a scope of the pool (its spawns run on the pool's threads: those
    /// kept awake after the last pass stop spinning and take them), then keeps
    /// `threads` of them awake for the next pass.
    fn scope<'s>(&self, threads: usize, f: impl FnOnce(&rayon::Scope<'s>)) {
        self.release();
        self.threads.in_place_scope(f);
        let seen = self.passes.load(Ordering::Acquire);
        for _ in 0..threads {
            let passes = Arc::clone(&self.passes);
            self.threads.spawn(move || {
                let until = Instant::now() + KEEP_AWAKE;
                // The clock now and then: reading it costs more than a spin.
                let mut spins = 0u32;
                spin_until(|| {
                    spins = spins.wrapping_add(1);
                    passes.load(Ordering::Acquire) != seen
                        || (spins % 1024 == 0 && Instant::now() >= until)
                });
            });
        }
    }
}

/// Spins until `done()`, yielding the core now and then (the thread it waits for
/// may need it).
fn spin_until(mut done: impl FnMut() -> bool) {
    let mut spins = 0u32;
    while !done() {
        spins = spins.wrapping_add(1);
        if spins % 64 == 0 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Where the server's write passes spent their time, since it started (wall time on
/// the calling thread; see [`ReplicationServer::pass_times`](super::ReplicationServer::pass_times)).
///
/// Only [`writing`](Self::writing) is spread over writer threads: each pass begins by
/// taking the connections' allowances and grouping their packets, and ends by settling
/// what the packets nominated (snapshots, lineages, budgets) on the calling thread.
/// With the rest of the server's tick (the objects' changes, packet fates), what is
/// not writing bounds what more writer threads can gain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PassTimes {
    /// Write passes.
    pub passes: u64,
    /// Of those, the passes written on more than one thread.
    pub threaded_passes: u64,
    /// Taking each connection's allowance and grouping the packets.
    pub preparing: Duration,
    /// Writing the packets, on the writer threads.
    pub writing: Duration,
    /// Settling the pass: nominations take their snapshots and lineages, budgets are
    /// paid, reserved snapshots are copied.
    pub settling: Duration,
}

impl std::ops::Sub for PassTimes {
    type Output = Self;

    /// What the passes between two readings spent (`self` the later).
    fn sub(self, earlier: Self) -> Self {
        Self {
            passes: self.passes.saturating_sub(earlier.passes),
            threaded_passes: self.threaded_passes.saturating_sub(earlier.threaded_passes),
            preparing: self.preparing.saturating_sub(earlier.preparing),
            writing: self.writing.saturating_sub(earlier.writing),
            settling: self.settling.saturating_sub(earlier.settling),
        }
    }
}

/// How a thread is to work a chunk of a pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Share {
    /// A head: each item whose group differs from the item's before leads its group.
    /// `publishes`: the group's rest is in chunks any thread may steal, which need
    /// the leader's trace (publish it right after the leader's packet).
    Head { publishes: bool },
    /// Followers of a group whose head this thread wrote.
    Rest,
    /// Followers of a group whose head another thread wrote (adopt its trace).
    Stolen,
}

/// A head of a pass (see the module documentation) and the rest of its group.
struct Cut<'a, T> {
    head: &'a mut [T],
    rest: Vec<&'a mut [T]>,
}

/// `items` (each group's consecutive) cut into heads and rests of about `size` items:
/// consecutive small groups share a head up to `size`; a group larger than `size`
/// has a head of its own, its first `size` items, and the rest in chunks of `size`.
fn cut<T>(mut items: &mut [T], size: usize, group: impl Fn(&T) -> usize) -> VecDeque<Cut<'_, T>> {
    let size = size.max(1);
    let mut cuts = VecDeque::new();
    // The length of the group starting at `at`.
    let run_at = |items: &[T], at: usize| {
        let g = group(&items[at]);
        items[at..].iter().take_while(|i| group(i) == g).count()
    };
    while !items.is_empty() {
        let run = run_at(items, 0);
        if run > size {
            let (whole, tail) = std::mem::take(&mut items).split_at_mut(run);
            let (head, mut left) = whole.split_at_mut(size);
            let mut rest = Vec::new();
            while !left.is_empty() {
                let n = size.min(left.len());
                let (chunk, more) = std::mem::take(&mut left).split_at_mut(n);
                rest.push(chunk);
                left = more;
            }
            cuts.push_back(Cut { head, rest });
            items = tail;
            continue;
        }
        // Whole groups, as many as fit.
        let mut end = run;
        while end < items.len() {
            let next = run_at(items, end);
            if end + next > size {
                break;
            }
            end += next;
        }
        let (head, tail) = std::mem::take(&mut items).split_at_mut(end);
        cuts.push_back(Cut {
            head,
            rest: Vec::new(),
        });
        items = tail;
    }
    cuts
}

/// A pass's chunks as its threads take them.
struct Chunks<'a, T> {
    /// Heads not taken yet.
    heads: Mutex<VecDeque<Cut<'a, T>>>,
    /// Per thread, the chunks of the rests of the groups whose heads it wrote.
    rests: Vec<Mutex<VecDeque<&'a mut [T]>>>,
    /// Chunks (heads and rests) not taken yet.
    untaken: AtomicUsize,
    /// Rest chunks released so far (a thread out of chunks waits for it to grow).
    released: AtomicUsize,
    /// A thread unwound: the others stop (a rest it held is never released).
    stop: AtomicBool,
    /// Threads besides the calling one that have not returned yet.
    others: AtomicUsize,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<'a, T> Chunks<'a, T> {
    fn new(cuts: VecDeque<Cut<'a, T>>, threads: usize) -> Self {
        let chunks = cuts.iter().map(|c| 1 + c.rest.len()).sum();
        Self {
            heads: Mutex::new(cuts),
            rests: (0..threads).map(|_| Mutex::default()).collect(),
            untaken: AtomicUsize::new(chunks),
            released: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            others: AtomicUsize::new(threads - 1),
        }
    }

    /// Waits, spinning, until the threads besides the calling one returned: a scope
    /// would put the calling thread to sleep, and waking it takes longer than the
    /// wait (the threads end within a chunk of each other).
    fn wait_for_others(&self) {
        spin_until(|| self.others.load(Ordering::Acquire) == 0);
    }

    /// Works chunks on thread `k` (0: the calling thread) until none is left: its own
    /// rests first, then a head (whose rest it then holds), then another thread's
    /// rests. Waits while the only chunks left are rests of heads being written.
    fn work<C>(&self, k: usize, cache: &mut C, work: &impl Fn(&mut C, &mut [T], Share)) {
        let _stop = StopOnUnwind(&self.stop);
        let _returned = (k > 0).then(|| Returned(&self.others));
        loop {
            if let Some(chunk) = self.rests.get(k).and_then(|r| lock(r).pop_front()) {
                self.untaken.fetch_sub(1, Ordering::AcqRel);
                work(cache, chunk, Share::Rest);
                continue;
            }
            let head = {
                let mut heads = lock(&self.heads);
                if k == 0 {
                    heads.pop_front()
                } else {
                    heads.pop_back()
                }
            };
            if let Some(Cut { head, rest }) = head {
                self.untaken.fetch_sub(1, Ordering::AcqRel);
                let publishes = !rest.is_empty();
                work(cache, head, Share::Head { publishes });
                if let Some(rests) = self.rests.get(k).filter(|_| publishes) {
                    let count = rest.len();
                    lock(rests).extend(rest);
                    self.released.fetch_add(count, Ordering::AcqRel);
                }
                continue;
            }
            let threads = self.rests.len();
            let stolen = (1..threads).find_map(|d| lock(&self.rests[(k + d) % threads]).pop_back());
            if let Some(chunk) = stolen {
                self.untaken.fetch_sub(1, Ordering::AcqRel);
                work(cache, chunk, Share::Stolen);
                continue;
            }
            // Every chunk left is in the rest of a head being written.
            let released = self.released.load(Ordering::Acquire);
            let over =
                || self.untaken.load(Ordering::Acquire) == 0 || self.stop.load(Ordering::Acquire);
            if over() {
                return;
            }
            spin_until(|| over() || self.released.load(Ordering::Acquire) != released);
        }
    }
}

/// Counts a thread besides the calling one out when it returns (or unwinds).
struct Returned<'a>(&'a AtomicUsize);

impl Drop for Returned<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Tells the other threads of a pass to stop when its thread unwinds.
struct StopOnUnwind<'a>(&'a AtomicBool);

impl Drop for StopOnUnwind<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

/// Runs `work` over `items` on the calling thread and up to `caches.len() - 1` others
/// (`pool`'s, or threads started for the call without one), each thread with its own
/// cache, in chunks (see the module documentation): `group` gives an item's group,
/// whose items are consecutive. On one thread, one chunk: every item, in order.
pub(crate) fn on_writer_threads<T: Send, C: Send>(
    pool: Option<&WriterPool>,
    items: &mut [T],
    caches: &mut [C],
    group: impl Fn(&T) -> usize,
    work: impl Fn(&mut C, &mut [T], Share) + Sync,
) {
    let Some((first_cache, other_caches)) = caches.split_first_mut() else {
        return;
    };
    if other_caches.is_empty() || items.len() < 2 {
        work(first_cache, items, Share::Head { publishes: false });
        return;
    }
    let threads = other_caches.len().min(items.len() - 1) + 1;
    let size = items.len().div_ceil(threads * CHUNKS_PER_THREAD);
    let chunks = Chunks::new(cut(items, size, group), threads);
    let (chunks, work) = (&chunks, &work);
    let others = other_caches.iter_mut().take(threads - 1).enumerate();
    match pool {
        Some(pool) => pool.scope(threads - 1, |scope| {
            for (k, cache) in others {
                scope.spawn(move |_| chunks.work(k + 1, cache, work));
            }
            chunks.work(0, first_cache, work);
            chunks.wait_for_others();
        }),
        None => std::thread::scope(|scope| {
            for (k, cache) in others {
                scope.spawn(move || chunks.work(k + 1, cache, work));
            }
            chunks.work(0, first_cache, work);
        }),
    }
}

/// How many of `threads` writer threads a pass runs on, given its packets' groups in
/// order (see `in_groups`): all of them, unless every packet is in the first group
/// and there are fewer than [`MIN_PACKETS_IN_STEP_FOR_THREADS`].
pub(crate) fn pass_threads(mut groups: impl Iterator<Item = usize>, threads: usize) -> usize {
    let mut packets = 0;
    let one_group = groups.all(|g| {
        packets += 1;
        g == 0
    });
    if one_group && packets < MIN_PACKETS_IN_STEP_FOR_THREADS {
        threads.min(1)
    } else {
        threads
    }
}

#[cfg(test)]
mod tests {
    use super::{
        MIN_PACKETS_IN_STEP_FOR_THREADS, Share, WriterPool, cut, on_writer_threads, pass_threads,
    };
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    /// Runs an `on_writer_threads` case with threads started for the call, then with
    /// a pool of `threads - 1`.
    fn both_ways(threads: usize, case: impl Fn(Option<&WriterPool>)) {
        case(None);
        let pool = WriterPool::new(threads.saturating_sub(1).max(1));
        case(Some(&pool.expect("a test pool starts")));
    }

    /// Items in groups of the given sizes: (group, item).
    fn grouped(sizes: &[usize]) -> Vec<(usize, usize)> {
        let groups = sizes.iter().enumerate();
        let groups = groups.flat_map(|(g, &n)| std::iter::repeat_n(g, n));
        groups.enumerate().map(|(i, g)| (g, i)).collect()
    }

    /// One item's visit: the thread (cache), how its chunk was shared, the chunk's
    /// start and end on a pass-wide clock, and the chunk's first item.
    #[derive(Debug, Clone, Copy)]
    struct Visit {
        thread: usize,
        share: Share,
        start: usize,
        end: usize,
        first: usize,
    }

    /// Works `items` on `threads` threads, noting every visit (`pause` runs inside
    /// each chunk's work, given the thread and the share).
    fn visits(
        pool: Option<&WriterPool>,
        items: &[(usize, usize)],
        threads: usize,
        pause: impl Fn(usize, Share) + Sync,
    ) -> Vec<Vec<Visit>> {
        let clock = AtomicUsize::new(0);
        let mut work: Vec<((usize, usize), Vec<Visit>)> =
            items.iter().map(|&i| (i, Vec::new())).collect();
        let mut caches: Vec<usize> = (0..threads).collect();
        on_writer_threads(
            pool,
            &mut work,
            &mut caches,
            |((g, _), _)| *g,
            |&mut thread, chunk, share| {
                let start = clock.fetch_add(1, Ordering::AcqRel);
                pause(thread, share);
                let end = clock.fetch_add(1, Ordering::AcqRel);
                let first = chunk[0].0.1;
                for (_, seen) in chunk.iter_mut() {
                    seen.push(Visit {
                        thread,
                        share,
                        start,
                        end,
                        first,
                    });
                }
            },
        );
        work.into_iter().map(|(_, v)| v).collect()
    }

    #[test]
    fn every_item_is_worked_once_each_group_after_its_leader() {
        let layouts: [&[usize]; 6] = [
            &[1],
            &[2],
            &[40],
            &[17, 17, 16, 16, 16, 16],
            &[9, 1, 1, 1, 5, 3],
            &[1; 30],
        ];
        for sizes in layouts {
            for threads in [1, 2, 3] {
                both_ways(threads, |pool| {
                    let items = grouped(sizes);
                    // A head that publishes lasts: other threads idle meanwhile, and
                    // would steal its rest if it were out too early.
                    let seen = visits(pool, &items, threads, |_, share| {
                        if share == (Share::Head { publishes: true }) {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    });
                    assert!(
                        seen.iter().all(|v| v.len() == 1),
                        "{sizes:?} on {threads}: once each"
                    );
                    let seen: Vec<Visit> = seen.into_iter().map(|v| v[0]).collect();
                    for (&(g, i), v) in items.iter().zip(&seen) {
                        // The group's leader: its first item.
                        let leader = items.iter().position(|&(h, _)| h == g).unwrap();
                        let lv = seen[leader];
                        assert!(
                            matches!(lv.share, Share::Head { .. }),
                            "{sizes:?}: a leader heads"
                        );
                        if v.first != lv.first {
                            // A follower in another chunk: after the head was written,
                            // which published for it, on its thread unless stolen.
                            assert_eq!(lv.share, Share::Head { publishes: true }, "{sizes:?}");
                            assert!(v.start > lv.end, "{sizes:?}: item {i} before its leader");
                            match v.share {
                                Share::Rest => assert_eq!(v.thread, lv.thread),
                                Share::Stolen => assert_ne!(v.thread, lv.thread),
                                Share::Head { .. } => {
                                    panic!("{sizes:?}: item {i} heads in its group")
                                }
                            }
                        }
                    }
                    if threads == 1 {
                        // One chunk, in order.
                        assert!(seen.iter().all(|v| v.first == 0 && v.thread == 0));
                    }
                });
            }
        }
    }

    #[test]
    fn a_thread_out_of_heads_steals_the_rest_of_a_group() {
        both_ways(2, |pool| {
            // One large group: one thread heads it (whichever takes it first); the
            // other has no head to take and steals.
            let stolen = AtomicBool::new(false);
            let items = grouped(&[64]);
            let seen = visits(pool, &items, 2, |_, share| {
                if share == Share::Stolen {
                    stolen.store(true, Ordering::Release);
                } else if share == Share::Rest {
                    // The head's thread waits in its rest until the other stole.
                    let deadline = Instant::now() + Duration::from_secs(5);
                    while !stolen.load(Ordering::Acquire) && Instant::now() < deadline {
                        std::thread::yield_now();
                    }
                }
            });
            assert!(stolen.load(Ordering::Acquire));
            let header = seen[0][0].thread;
            let by_share = |share: Share| seen.iter().filter(move |v| v[0].share == share);
            assert!(by_share(Share::Rest).all(|v| v[0].thread == header));
            assert!(by_share(Share::Stolen).all(|v| v[0].thread != header));
            assert!(by_share(Share::Stolen).count() > 0);
        });
    }

    #[test]
    fn heads_keep_small_groups_whole_and_cut_large_ones() {
        let shape = |sizes: &[usize], size: usize| {
            let mut items = grouped(sizes);
            let cuts = cut(&mut items, size, |&(g, _)| g);
            let seen: Vec<usize> = cuts
                .iter()
                .flat_map(|c| c.head.iter().chain(c.rest.iter().flat_map(|r| r.iter())))
                .map(|&(_, i)| i)
                .collect();
            assert_eq!(
                seen,
                (0..seen.len()).collect::<Vec<_>>(),
                "every item once, in order"
            );
            cuts.iter()
                .map(|c| {
                    (
                        c.head.len(),
                        c.rest.iter().map(|r| r.len()).collect::<Vec<_>>(),
                    )
                })
                .collect::<Vec<_>>()
        };
        // Small groups share a head up to its size; one that would not fit starts
        // the next.
        assert_eq!(
            shape(&[2, 3, 2, 1], 4),
            [(2, vec![]), (3, vec![]), (3, vec![])]
        );
        // A large group: a head of the size, its rest in chunks of the size.
        assert_eq!(
            shape(&[10, 3, 6], 4),
            [(4, vec![4, 2]), (3, vec![]), (4, vec![2])]
        );
        // Connections alone (groups of one) fill heads.
        assert_eq!(shape(&[1; 7], 3), [(3, vec![]), (3, vec![]), (1, vec![])]);
        assert!(shape(&[], 3).is_empty());
    }

    #[test]
    fn a_thread_unwinding_stops_the_others() {
        both_ways(2, |pool| {
            // The head of the one group fails: its rest is never released, and the
            // other thread, waiting for it, must stop.
            let mut work = vec![0u32; 64];
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                on_writer_threads(
                    pool,
                    &mut work,
                    &mut [(), ()],
                    |_| 0,
                    |_, _, share| {
                        assert_ne!(share, Share::Head { publishes: true }, "the leader fails");
                    },
                )
            }));
            assert!(run.is_err());
        });
    }

    #[test]
    fn a_small_pass_of_one_group_stays_on_the_calling_thread() {
        let in_step = |n: usize| std::iter::repeat_n(0, n);
        let small = MIN_PACKETS_IN_STEP_FOR_THREADS - 1;
        assert_eq!(pass_threads(in_step(small), 2), 1);
        assert_eq!(pass_threads(in_step(small + 1), 2), 2);
        assert_eq!(pass_threads(in_step(small + 1), 1), 1);
        // Another group, however small the pass: a thread writes it beside the first.
        assert_eq!(pass_threads(in_step(3).chain([1]), 4), 4);
        assert_eq!(pass_threads([0, 1, 2].into_iter(), 2), 2);
        assert_eq!(pass_threads(std::iter::empty(), 2), 1);
    }
}
