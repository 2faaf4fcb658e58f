//! Cost of a parallel thread inside a real-time job: one job opens 200 regions of 64 empty
//! threads (each pushed under the dispatcher lock; run inline on the job's fiber when its own
//! core takes it, on a fiber when another core steals it), on 1 worker and on all workers;
//! prints the time per thread, median of 5 jobs.
//!
//! ```text
//! cargo run --release -p schedkit-runtime --example paws_region_cost
//! ```

use schedkit_runtime::paws::{Mode, RtConfig, RtPool};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn main() {
    let all = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    println!("{:<8} {:>16}", "workers", "ns per thread");
    for workers in [1, all] {
        let pool = RtPool::new(RtConfig::quiet(Mode::Paws, workers)).unwrap();
        let times = Arc::new(Mutex::new(Vec::new()));
        for _ in 0..5 {
            let t = times.clone();
            pool.submit(Duration::from_secs(10), move |job| {
                let start = Instant::now();
                for _ in 0..200 {
                    job.parallel(64, |_| {});
                }
                t.lock()
                    .unwrap()
                    .push(start.elapsed().as_nanos() as f64 / (200.0 * 64.0));
            });
        }
        drop(pool.stop());
        let mut v = times.lock().unwrap().clone();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        println!("{:<8} {:>16.0}", workers, v[v.len() / 2]);
    }
}
