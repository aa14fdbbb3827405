//! `wake-cost`: what one sleep costs the thread that sleeps, on this
//! machine — the measure behind `--nap`'s trade (docs/operations.md,
//! "Pipelined load: `--nap`").
//!
//! A thread pinned to `--sleeper-cpu` does a little work (`--work` rounds
//! of a multiply), then sleeps, `--sleeps` times, each way in turn:
//!
//! - `none`: no sleep, the work alone;
//! - `nap`: `std::thread::sleep(--nap)` with a tenth of it as timer slack,
//!   as a worker naps — its own timer wakes it;
//! - `epoll`: `epoll_wait` on a pipe that a thread spinning on
//!   `--waker-cpu` writes every `--period` µs — the other core's write
//!   wakes it, as a client's wakes a waiting worker.
//!
//! For each it prints the sleeper's CPU time per sleep beyond `none`'s
//! (the scheduler's own count, /proc/thread-self/schedstat), and the wall
//! time per sleep. Linux only.
//!
//! `cargo run --release -p unflat-peers --bin wake-cost`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;

/// What one sleep costs the thread that sleeps.
#[derive(Parser)]
struct Args {
    /// Sleeps of each way.
    #[arg(long, default_value_t = 20_000, value_parser = clap::value_parser!(u32).range(1..))]
    sleeps: u32,
    /// Rounds of work between two sleeps.
    #[arg(long, default_value_t = 1_000)]
    work: u64,
    /// The nap, µs.
    #[arg(long, default_value_t = 75)]
    nap: u64,
    /// How often the waker writes, µs.
    #[arg(long, default_value_t = 100)]
    period: u64,
    /// The CPU the sleeping thread runs on.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u16).range(..1024))]
    sleeper_cpu: u16,
    /// The CPU the waking thread spins on.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(..1024))]
    waker_cpu: u16,
}

/// Pins this thread to `cpu` (below 1 024, the size of a `cpu_set_t`), or
/// ends the process naming it.
fn pin(cpu: u16) {
    // SAFETY: a zeroed cpu_set_t is an empty set; the call reads it only.
    let pinned = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(usize::from(cpu), &mut set);
        libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set)
    };
    if pinned != 0 {
        let why = std::io::Error::last_os_error();
        eprintln!("wake-cost: cannot run on CPU {cpu}: {why}");
        std::process::exit(2);
    }
}

/// This thread's time on a CPU so far, in µs (the scheduler's count).
fn on_cpu() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").expect("schedstat");
    let ns: f64 = stat
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .expect("schedstat's first field");
    ns / 1000.0
}

/// `r`, a system call's result, unless it says the call failed.
fn check(what: &str, r: libc::c_int) -> libc::c_int {
    assert!(r >= 0, "{what}: {}", std::io::Error::last_os_error());
    r
}

fn main() {
    let a = Args::parse();
    pin(a.sleeper_cpu);
    // A tenth of the nap, in ns, as a worker's (server/src/net/nap.rs).
    let slack = a.nap.saturating_mul(100);
    // SAFETY: prctl with PR_SET_TIMERSLACK takes a number.
    check("PR_SET_TIMERSLACK", unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, slack)
    });
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    check("pipe2", unsafe {
        libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK)
    });
    let (rx, tx) = (fds[0], fds[1]);
    let stop = Arc::new(AtomicBool::new(false));
    let waker = {
        let (stop, period, cpu) = (stop.clone(), Duration::from_micros(a.period), a.waker_cpu);
        std::thread::spawn(move || {
            pin(cpu);
            while !stop.load(Ordering::Relaxed) {
                let begun = Instant::now();
                while begun.elapsed() < period {
                    std::hint::spin_loop();
                }
                // SAFETY: one byte from a live buffer; a full pipe is fine.
                unsafe { libc::write(tx, b"x".as_ptr().cast(), 1) };
            }
        })
    };
    // SAFETY: a system call with no pointer.
    let ep = check("epoll_create1", unsafe { libc::epoll_create1(0) });
    let mut interest = libc::epoll_event {
        events: libc::EPOLLIN as u32,
        u64: 0,
    };
    // SAFETY: `interest` outlives the call; `rx` and `ep` are open.
    check("epoll_ctl", unsafe {
        libc::epoll_ctl(ep, libc::EPOLL_CTL_ADD, rx, &mut interest)
    });
    let mut base = 0.0;
    for way in ["none", "nap", "epoll"] {
        let (cpu, wall) = (on_cpu(), Instant::now());
        let mut x = 1u64;
        for _ in 0..a.sleeps {
            for i in 0..a.work {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(i));
            }
            match way {
                "nap" => std::thread::sleep(Duration::from_micros(a.nap)),
                "epoll" => {
                    let mut events = [libc::epoll_event { events: 0, u64: 0 }; 4];
                    let mut drain = [0u8; 64];
                    // SAFETY: the buffers outlive the calls.
                    unsafe {
                        check(
                            "epoll_wait",
                            libc::epoll_wait(ep, events.as_mut_ptr(), 4, -1),
                        );
                        libc::read(rx, drain.as_mut_ptr().cast(), drain.len());
                    }
                }
                _ => {}
            }
        }
        let per = |v: f64| v / f64::from(a.sleeps);
        let (cpu, wall) = (per(on_cpu() - cpu), per(wall.elapsed().as_secs_f64() * 1e6));
        if way == "none" {
            base = cpu;
            println!("none: {cpu:.2} µs of CPU a round of work");
        } else {
            println!("{way}: {:.2} µs of the sleeper's CPU a sleep beyond the work, {wall:.2} µs wall a round", cpu - base);
        }
    }
    stop.store(true, Ordering::Relaxed);
    waker.join().unwrap();
}
