//! The job router's planner: one pass over 100,000 idle jobs and 20 routes
//! (each job matched against the routes' Requirements, the least-loaded
//! matching route chosen, and its routed copy built with the transforms).
#![allow(missing_docs, reason = "criterion_group! defines an undocumented public function")]

use andes_schedd::job::JobId;
use andes_schedd::router::{RouteLoad, Table, plan};
use classad::ClassAd;
use criterion::{Criterion, criterion_group, criterion_main};

fn table() -> Table {
    let defaults = r#"[ MaxJobs = 1000000; MaxIdleJobs = 1000000;
        Requirements = TARGET.WantJobRouter is true && TARGET.RequestMemory <= MaxMemory;
        set_PeriodicRemove = JobStatus == 5 || (JobStatus == 1 && (time() - QDate) > 3600*6);
        delete_WantJobRouter = true; set_requirements = true;
        copy_Requirements = "OriginalRequirements"; eval_set_RoutedAt = time() ]"#;
    let entries: String = (0..20)
        .map(|i| {
            format!(
                "[ Name = \"site{i}\"; GridResource = \"andes 10.0.0.{i}:9618\"; MaxMemory = {} ]\n",
                256 * (1 + i % 8)
            )
        })
        .collect();
    Table::load(Some(defaults), &[("entries".into(), entries)]).unwrap()
}

fn jobs(n: u32) -> Vec<(JobId, ClassAd)> {
    (0..n)
        .map(|i| {
            let ad = classad::parse_ad(&format!(
                r#"[ClusterId = {c}; ProcId = {p}; Owner = "u{o}"; JobStatus = 1; QDate = 1000;
                    Cmd = "job.wasm"; Arguments = "{i}"; RequestMemory = {m}; RequestDisk = 1024;
                    Requirements = TARGET.HasWasm && TARGET.Memory >= RequestMemory;
                    LastRejMatchTime = 900; WantJobRouter = LastRejMatchTime =!= UNDEFINED]"#,
                c = i / 1000,
                p = i % 1000,
                o = i % 7,
                m = 128 * (1 + i % 16),
            ))
            .unwrap();
            (JobId::new(i / 1000, i % 1000), ad)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let t = table();
    let n = if std::env::args().any(|a| a == "--bench") { 100_000 } else { 1_000 };
    let j = jobs(n);
    let mut g = c.benchmark_group("router");
    g.sample_size(10);
    g.bench_function("plan_100000_jobs_20_routes", |b| {
        b.iter(|| {
            let mut loads = vec![RouteLoad::default(); t.routes.len()];
            let d = plan(&t, &mut loads, &j, 2000, &andes_schedd::quarantine::Journal::none());
            assert!(d.len() as u32 >= n / 2);
            d
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
