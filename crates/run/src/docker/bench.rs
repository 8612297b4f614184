//! `overeager bench docker`: what a Docker run costs beyond the container itself.
//!
//! Side by side, alternating: one complete run through the executor (sandbox prepared here,
//! volume, copy in, hardened container, copy out, snapshots, audit, bundle) against a bare
//! `docker run --rm` of the same image, with the same limits, the same command and the same
//! sandbox already in a volume (filling that volume is not timed). Then runs/s with two runs
//! at a time, for both.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use bollard::models::VolumeCreateRequest;
use bollard::query_parameters::UploadToContainerOptions;

use super::{DockerExecutor, Object, image, labels, layout, live, phases, runtime, sandbox_tar};
use crate::{AgentSpec, Executor, RunRequest, local};
use overeager_scenario::LoadedScenario;

/// Wall times in milliseconds of each side.
pub struct Figures {
    pub overeager_ms: Vec<f64>,
    pub bare_ms: Vec<f64>,
    /// Runs per second with two at a time: (overeager, bare), and how many runs each.
    pub parallel2: (f64, f64, usize),
}

/// A bare `docker run --rm` ready to go: the volume holding the sandbox, the command line.
struct Bare {
    volume: String,
    args: Vec<String>,
}

impl DockerExecutor {
    /// Prepares the sandbox of `req` exactly as a run does and puts it into a fresh volume;
    /// returns the `docker run --rm` arguments that run the same command on it.
    fn bare_run(&self, req: &RunRequest<'_>) -> Result<Bare> {
        let (image, _) = self.image_for(req)?;
        let mut p = local::prepare(req, false)?;
        let run = phases(req, &mut p, &image)?;
        if run.setup.is_some() {
            bail!("pick a scenario without model.setup for the bare comparison");
        }
        let tar = sandbox_tar(&p)?;
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let volume = format!("overeager-bench-{}-{seq}", std::process::id());
        let filler = format!("{volume}-fill");
        runtime().block_on(async {
            self.docker.create_volume(VolumeCreateRequest { name: Some(volume.clone()), labels: Some(labels(&[])), ..Default::default() }).await?;
            self.track(Object::Volume(volume.clone()));
            self.create(&filler, Some(&volume), None, &image, vec!["true".into()], Vec::new(), labels(&[])).await?;
            self.docker
                .upload_to_container(&filler, Some(UploadToContainerOptions { path: layout::ROOT.into(), ..Default::default() }), bollard::body_full(tar.into()))
                .await?;
            self.remove(&[Object::Container(filler.clone())]).await
        })?;
        let l = self.limits;
        let mut args: Vec<String> = ["run", "--rm", "--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only"].map(String::from).to_vec();
        args.extend([
            "--pids-limit".into(),
            l.pids.to_string(),
            "--memory".into(),
            l.memory.to_string(),
            "--memory-swap".into(),
            l.memory.to_string(),
            "--cpus".into(),
            format!("{}", l.nano_cpus as f64 / 1e9),
            "--tmpfs".into(),
            format!("/tmp:rw,nosuid,nodev,size={},mode=1777", l.tmp_bytes),
            "--user".into(),
            format!("{0}:{0}", image::AGENT_UID),
            "--workdir".into(),
            layout::WORK.into(),
            "--volume".into(),
            format!("{volume}:{}", layout::ROOT),
            "--entrypoint".into(),
            run.agent.0[0].clone(),
        ]);
        for e in &run.agent.1 {
            args.extend(["--env".into(), e.clone()]);
        }
        args.push(run.image.to_string());
        args.extend(run.agent.0[1..].iter().cloned());
        Ok(Bare { volume, args })
    }

    fn drop_volume(&self, volume: &str) -> Result<()> {
        runtime().block_on(self.remove(&[Object::Volume(volume.to_string())]))
    }
}

/// Runs one bare `docker run --rm`.
fn run_bare(bare: &Bare) -> Result<()> {
    let out = Command::new("docker").args(&bare.args).output().context("running the docker command-line client")?;
    if !out.status.success() {
        bail!("bare docker run failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Times one bare run; the volume is removed afterwards (not timed).
fn time_bare(exec: &DockerExecutor, bare: Bare) -> Result<f64> {
    let t = Instant::now();
    let ran = run_bare(&bare);
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    exec.drop_volume(&bare.volume)?;
    ran.map(|()| ms)
}

/// Measures `iterations` pairs, then `parallel_runs` runs of each side two at a time. `bundle`
/// makes the run's bundle (the audit stage, handed in: data flows from run to audit).
#[allow(clippy::too_many_arguments)]
pub fn bench(
    exec: &Arc<DockerExecutor>,
    scenario: &LoadedScenario,
    agent: AgentSpec,
    shim: &Path,
    iterations: usize,
    parallel_runs: usize,
    tmp: &Path,
    bundle: &(dyn Fn(&RunRequest<'_>, &Path) -> Result<()> + Sync),
) -> Result<Figures> {
    let executor = Executor::Docker(exec.clone());
    let req = |_: usize| RunRequest::new(&executor, scenario, agent.clone(), shim.to_path_buf());
    let counter = std::sync::atomic::AtomicUsize::new(0);
    let overeager_run = |i: usize| -> Result<f64> {
        let out = tmp.join(format!("b{}", counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed)));
        let t = Instant::now();
        bundle(&req(i), &out)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        std::fs::remove_dir_all(&out)?;
        Ok(ms)
    };
    // Warm up: the image is imported on the first run, and the engine's caches fill.
    overeager_run(0)?;
    time_bare(exec, exec.bare_run(&req(0))?)?;
    let (mut ours, mut bare) = (Vec::new(), Vec::new());
    for i in 0..iterations.max(1) {
        // Alternate which goes first, so drift in the machine's load hits both alike.
        if i % 2 == 0 {
            ours.push(overeager_run(i)?);
            bare.push(time_bare(exec, exec.bare_run(&req(i))?)?);
        } else {
            bare.push(time_bare(exec, exec.bare_run(&req(i))?)?);
            ours.push(overeager_run(i)?);
        }
    }
    let n = parallel_runs.max(2);
    let t = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let hs: Vec<_> = (0..2).map(|w| s.spawn(move || (0..n / 2).try_for_each(|i| overeager_run(w * n + i).map(|_| ())))).collect();
        hs.into_iter().try_for_each(|h| h.join().map_err(|_| anyhow::anyhow!("a bench thread panicked"))?)
    })?;
    let ours_rate = (n / 2 * 2) as f64 / t.elapsed().as_secs_f64();
    // The bare side's volumes are filled first: only the runs are timed.
    let prepared: Vec<Bare> = (0..n / 2 * 2).map(|i| exec.bare_run(&req(i))).collect::<Result<_>>()?;
    let mut halves: [Vec<Bare>; 2] = [Vec::new(), Vec::new()];
    for (i, b) in prepared.into_iter().enumerate() {
        halves[i % 2].push(b);
    }
    let t = Instant::now();
    std::thread::scope(|s| -> Result<()> {
        let hs: Vec<_> = halves.into_iter().map(|half| s.spawn(move || half.iter().try_for_each(run_bare))).collect();
        hs.into_iter().try_for_each(|h| h.join().map_err(|_| anyhow::anyhow!("a bench thread panicked"))?)
    })?;
    let bare_rate = (n / 2 * 2) as f64 / t.elapsed().as_secs_f64();
    // The volumes of the parallel bare runs.
    let leftovers: Vec<Object> = live()
        .get(exec.address())
        .map(|(_, set)| set.iter().filter(|o| matches!(o, Object::Volume(v) if v.starts_with("overeager-bench-"))).cloned().collect())
        .unwrap_or_default();
    runtime().block_on(exec.remove(&leftovers))?;
    Ok(Figures { overeager_ms: ours, bare_ms: bare, parallel2: (ours_rate, bare_rate, n / 2 * 2) })
}
