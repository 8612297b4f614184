//! Experiments, the store, reports, human labels, transfer import and the statistics
//! calculator, driven through the real binary against real SQLite files.

use crate::common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{copy_tree, ok, overeager, repo};
use serde_json::Value;

fn json(out: &Output) -> Value {
    serde_json::from_str(&ok(out)).expect("JSON output")
}

fn fails(out: &Output) -> String {
    assert!(!out.status.success(), "expected a failure, got:\n{}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn close(got: f64, want: f64) {
    assert!((got - want).abs() <= 1e-9 * want.abs(), "got {got:e}, want {want:e}");
}

/// A plan over the first `limit` seeds with the two simulated policies, written into `dir`.
fn sim_plan(dir: &Path, id: &str, replicates: u32, limit: usize) -> PathBuf {
    let plan = dir.join(format!("{id}.toml"));
    let text = format!(
        "id = \"{id}\"\nscenarios = {:?}\nlimit = {limit}\nreplicates = {replicates}\nseed = 7\nparallelism = 2\n\n\
         [[agent]]\nagent = \"sim:permissive\"\nframework = \"sim-permissive\"\nmodel = \"sim-base\"\n\n\
         [[agent]]\nagent = \"sim:ask\"\nframework = \"sim-ask\"\nmodel = \"sim-base\"\n",
        common::seeds().display().to_string()
    );
    std::fs::write(&plan, text).unwrap();
    plan
}

fn db_counts(db: &Path, experiment: &str) -> (i64, i64, i64, i64) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row(
        "SELECT COUNT(*), COALESCE(SUM(status = 'done'), 0), COUNT(DISTINCT id),
                (SELECT COUNT(*) FROM verdicts v JOIN runs r ON r.id = v.run WHERE r.experiment = ?1)
         FROM runs WHERE experiment = ?1",
        [experiment],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
    )
    .unwrap()
}

/// Kills a runner (SIGKILL) once `runs` runs of `experiment` are done in `db`, failing if it
/// finishes first or makes no progress for five minutes.
fn kill_after_runs(mut child: std::process::Child, db: &Path, experiment: &str, runs: i64) {
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if db.exists() && rusqlite::Connection::open(db).is_ok() {
            let done = std::panic::catch_unwind(|| db_counts(db, experiment).1).unwrap_or(0);
            if done >= runs {
                break;
            }
        }
        assert!(child.try_wait().unwrap().is_none(), "the runner finished before it could be killed");
        assert!(Instant::now() < deadline, "no progress");
    }
    // SAFETY: killing the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGKILL) };
    child.wait().unwrap();
}

/// Seed scenarios in the repository.
fn seed_count() -> i64 {
    std::fs::read_dir(common::seeds()).unwrap().filter(|e| e.as_ref().unwrap().path().join("scenario.toml").is_file()).count() as i64
}

#[test]
fn a_runner_killed_midway_resumes_to_a_complete_matrix_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    // The first 40 seeds (320 runs) are enough to kill it midway and resume.
    let seeds = 40;
    let plan = sim_plan(dir.path(), "killed", 2, seeds);
    let db = dir.path().join("store.db");
    let matrix = seeds as i64 * 2 * 2 * 2;
    // Its own scratch space, to see that the killed runner's sandboxes are cleaned up.
    let scratch = dir.path().join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(["experiment", "run", plan.to_str().unwrap(), "--db", db.to_str().unwrap()])
        .env("OVEREAGER_SCRATCH", &scratch)
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once some runs are recorded, well before the end.
    kill_after_runs(child, &db, "killed", 40);
    let (total, done, distinct, verdicts) = db_counts(&db, "killed");
    assert_eq!(total, matrix, "the whole matrix is recorded when the experiment is created");
    assert!(done < total, "killed midway ({done}/{total} done)");
    assert_eq!(verdicts, done, "every finished run has its verdict, and only those");
    assert_eq!(distinct, total);

    assert!(std::fs::read_dir(&scratch).unwrap().next().is_some(), "the killed runner left its scratch directory");
    let resumed = Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(["experiment", "run", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--json"])
        .env("OVEREAGER_SCRATCH", &scratch)
        .current_dir(repo())
        .output()
        .unwrap();
    let out = json(&resumed);
    let left: Vec<_> = std::fs::read_dir(&scratch).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "the resumed runner removed the killed one's scratch and its own: {left:?}");
    assert_eq!(out["created"], false);
    assert_eq!(out["executed"].as_i64().unwrap(), total - done, "exactly the unfinished runs are redone");
    assert_eq!(out["progress"]["done"].as_i64().unwrap(), matrix);
    let (total, done, distinct, verdicts) = db_counts(&db, "killed");
    assert_eq!((total, done, distinct, verdicts), (matrix, matrix, matrix, matrix));

    // Every run's bundle is in the object store under its digest, and distinct per run.
    let c = rusqlite::Connection::open(&db).unwrap();
    let mut stmt = c.prepare("SELECT bundle FROM runs WHERE experiment = 'killed'").unwrap();
    let digests: Vec<String> = stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert_eq!(digests.iter().collect::<BTreeSet<_>>().len() as i64, matrix);
    for d in digests.iter().take(25) {
        let p = dir.path().join(format!("store.db.objects/bundles/{}/{d}.oeb", &d[..2]));
        let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        assert_eq!(overeager_core::sha256_hex(&bytes), *d);
    }

    // Nothing left to do; a changed plan under the same id is refused, untouched.
    let again = json(&overeager(&["experiment", "run", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--json"]));
    assert_eq!(again["executed"], 0);
    let text = std::fs::read_to_string(&plan).unwrap().replace("replicates = 2", "replicates = 3");
    std::fs::write(&plan, text).unwrap();
    let err = fails(&overeager(&["experiment", "run", plan.to_str().unwrap(), "--db", db.to_str().unwrap()]));
    assert!(err.contains("already exists") && err.contains("plan changed"), "{err}");
    assert_eq!(db_counts(&db, "killed").0, matrix);
}

#[test]
fn a_simulated_experiment_reports_consent_and_policy_effects_with_figures_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sim.db");
    let dbs = db.to_str().unwrap();
    // The plan shipped in the repository: 2 policies × 2 variants × 3 replicates on the seeds.
    let out = json(&overeager(&["experiment", "run", "plans/sim-seeds.toml", "--db", dbs, "--json"]));
    assert_eq!(out["progress"]["done"], seed_count() * 2 * 2 * 3);
    assert_eq!(out["failed"], 0);
    let listed = json(&overeager(&["experiment", "list", "--db", dbs, "--json"]));
    assert_eq!(listed[0]["id"], "sim-seeds");
    let status = json(&overeager(&["experiment", "status", "sim-seeds", "--db", dbs, "--json"]));
    assert_eq!(status["agents"].as_array().unwrap().len(), 2);

    let report = dir.path().join("report");
    ok(&overeager(&["report", "sim-seeds", "--db", dbs, "--out", report.to_str().unwrap()]));
    for f in [
        "report.md", "report.json", "cells.csv", "consent.csv", "cross_framework.csv", "model_gaps.csv", "archetypes.csv", "axes.csv",
        "transfer.csv", "forest.svg", "forest.png", "heatmap.svg", "heatmap.png", "dumbbell.svg", "dumbbell.png",
    ] {
        assert!(report.join(f).is_file(), "{f} is written");
    }
    for fig in ["forest", "heatmap", "dumbbell"] {
        let png = std::fs::read(report.join(format!("{fig}.png"))).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        assert!(png.len() > 10_000, "{fig}.png has content");
        let svg = std::fs::read_to_string(report.join(format!("{fig}.svg"))).unwrap();
        assert!(svg.contains("<svg") && svg.contains("simulated agents"), "{fig}.svg is labelled simulated");
    }
    let md = std::fs::read_to_string(report.join("report.md")).unwrap();
    assert!(md.contains("**Simulated agents.**") && md.contains("*(simulated)*"));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap()).unwrap();
    assert_eq!(r["simulated"], true);
    assert_eq!(r["cells"].as_array().unwrap().len(), 4);

    // The consent effect: for both policies stripping the block makes runs overeager more often,
    // and significantly so.
    for c in r["consent"].as_array().unwrap() {
        assert_eq!(c["pairs"], seed_count() * 3, "every seed × replicate is a pair");
        assert!(c["only_stripped"].as_u64() > c["only_kept"].as_u64(), "{c}");
        assert!(c["rate_stripped"].as_f64() > c["rate_kept"].as_f64());
        assert!(c["p"].as_f64().unwrap() < 0.01, "consent effect of {}: p = {}", c["framework"], c["p"]);
    }
    // The policy effect: permissive is more overeager than ask-first in both variants.
    let cross = r["cross_framework"].as_array().unwrap();
    assert_eq!(cross.len(), 2);
    for c in cross {
        let (a, b) = (c["a"].as_str().unwrap(), c["b"].as_str().unwrap());
        let rate = |k: &str, n: &str| c[k].as_f64().unwrap() / c[n].as_f64().unwrap();
        let (ask, permissive) = if a == "sim-ask" { (rate("k_a", "n_a"), rate("k_b", "n_b")) } else { (rate("k_b", "n_b"), rate("k_a", "n_a")) };
        assert!(permissive > ask + 0.2, "{c}");
        assert!(c["p"].as_f64().unwrap() < 1e-6);
        assert!(b != a);
    }
    // Cells agree with the CSV.
    let csv = std::fs::read_to_string(report.join("cells.csv")).unwrap();
    assert_eq!(csv.lines().count(), 5);
    assert!(csv.lines().next().unwrap().starts_with("framework,model,variant,simulated,runs,timeouts,n,overeager,rate,ci_lo,ci_hi"));

    // Human labels: agree with the judge on all but 4 of 40 runs.
    let c = rusqlite::Connection::open(&db).unwrap();
    let mut stmt = c.prepare("SELECT r.id, v.overeager FROM runs r JOIN verdicts v ON v.run = r.id ORDER BY r.id LIMIT 40").unwrap();
    let runs: Vec<(String, bool)> = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap().map(Result::unwrap).collect();
    let mut labels = String::from("run_id,label\n");
    for (i, (id, judged)) in runs.iter().enumerate() {
        let human = if i < 4 { !judged } else { *judged };
        labels.push_str(&format!("{id},{}\n", if human { "overeager" } else { "safe" }));
    }
    let csv_path = dir.path().join("alice.csv");
    std::fs::write(&csv_path, &labels).unwrap();
    // A bad file is refused whole, naming the line.
    let bad = dir.path().join("bad.csv");
    std::fs::write(&bad, format!("{labels}no-such-run,overeager\n{},maybe\n", runs[0].0)).unwrap();
    let err = fails(&overeager(&["labels", "import", bad.to_str().unwrap(), "--db", dbs]));
    assert!(err.contains(":43:") && err.contains("maybe"), "{err}");
    let err = fails(&overeager(&["labels", "report", "--db", dbs]));
    assert!(err.contains("no labelled runs"), "{err}");
    ok(&overeager(&["labels", "import", csv_path.to_str().unwrap(), "--db", dbs]));
    let agreement = json(&overeager(&["labels", "report", "--db", dbs, "--json"]));
    let a = &agreement["raters"][0];
    assert_eq!(a["rater"], "alice");
    assert_eq!(a["n"], 40);
    let (both, human_only, judge_only, neither) =
        (a["both"].as_u64().unwrap(), a["human_only"].as_u64().unwrap(), a["judge_only"].as_u64().unwrap(), a["neither"].as_u64().unwrap());
    assert_eq!(human_only + judge_only, 4);
    assert_eq!(both + neither, 36);
    close(a["recall"].as_f64().unwrap(), both as f64 / (both + human_only) as f64);
    close(a["precision"].as_f64().unwrap(), both as f64 / (both + judge_only) as f64);
    let po = 36.0 / 40.0;
    let (h1, j1) = ((both + human_only) as f64 / 40.0, (both + judge_only) as f64 / 40.0);
    let pe = h1 * j1 + (1.0 - h1) * (1.0 - j1);
    close(a["kappa"].as_f64().unwrap(), (po - pe) / (1.0 - pe));
    // A second rater, named in a `rater` column, on the first 10 runs: the same calls as alice's
    // but for 2. The report compares the two raters on the runs both labelled.
    let mut bob = String::from("run,label,rater,comment\n");
    for (i, line) in labels.lines().skip(1).take(10).enumerate() {
        let (id, call) = line.split_once(',').unwrap();
        let call = if i < 2 { if call == "overeager" { "safe" } else { "overeager" } } else { call };
        bob.push_str(&format!("{id},{call},bob,\"looked at it, twice\"\n"));
    }
    let bob_path = dir.path().join("second.csv");
    std::fs::write(&bob_path, &bob).unwrap();
    assert!(ok(&overeager(&["labels", "import", bob_path.to_str().unwrap(), "--db", dbs])).contains("by 1 rater(s): `bob`"));
    // An import keeps the app's rules for a label, and refuses the whole file over one row.
    let year_2999 = "2999-01-01T00:00:00Z";
    for (row, says) in [
        (format!("{},overeager,\"ev\u{1b}[2Jil\",,,", runs[20].0), "is not a rater's name"),
        (format!("{},overeager,carol,{},,", runs[20].0, "x".repeat(4001)), "at most 4000"),
        (format!("{},overeager,carol,,{year_2999},", runs[20].0), "in the future"),
        (format!("{},overeager,carol,,,database-deleted:agree;no-such-trap:agree", runs[20].0), "did not fire"),
        (format!("{},overeager,bob,,,", runs[0].0), "pass --replace"),
    ] {
        let hostile = dir.path().join("hostile.csv");
        std::fs::write(&hostile, format!("run,label,rater,comment,labelled,traps\n{},safe,carol,,,\n{row}\n", runs[21].0)).unwrap();
        let err = fails(&overeager(&["labels", "import", hostile.to_str().unwrap(), "--db", dbs]));
        assert!(err.contains("hostile.csv:3:") && err.contains(says) && err.contains("nothing imported") && !err.contains('\u{1b}'), "{says}: {err}");
    }
    let agreement = json(&overeager(&["labels", "report", "--db", dbs, "--json"]));
    assert_eq!((agreement["labels"].as_u64(), agreement["runs"].as_u64()), (Some(50), Some(40)));
    let pair = &agreement["pairs"][0];
    assert_eq!((pair["a"].as_str(), pair["b"].as_str(), pair["n"].as_u64(), pair["same"].as_u64()), (Some("alice"), Some("bob"), Some(10), Some(8)));
    // The export is what import reads: importing it again changes nothing.
    let exported = ok(&overeager(&["labels", "export", "--db", dbs]));
    assert_eq!(exported.lines().count(), 51, "a header and 50 labels");
    assert!(exported.starts_with("run,rater,label,judge,traps,comment,labelled,source,experiment,framework,model,scenario,variant\n"), "{exported}");
    assert!(exported.contains(",bob,") && exported.contains("\"looked at it, twice\""), "{exported}");
    let again = dir.path().join("exported.csv");
    std::fs::write(&again, &exported).unwrap();
    let err = fails(&overeager(&["labels", "import", again.to_str().unwrap(), "--db", dbs]));
    assert!(err.contains("already") && err.contains("--replace"), "a stored label is replaced only when asked: {err}");
    ok(&overeager(&["labels", "import", again.to_str().unwrap(), "--replace", "--db", dbs]));
    assert_eq!(ok(&overeager(&["labels", "export", "--db", dbs])), exported);
    let after = json(&overeager(&["labels", "report", "--db", dbs, "--json"]));
    assert_eq!(after, agreement);
    // …and the report now has the labels section.
    ok(&overeager(&["report", "sim-seeds", "--db", dbs, "--out", report.to_str().unwrap(), "--no-figures"]));
    assert!(std::fs::read_to_string(report.join("report.md")).unwrap().contains("Human labels against the rule judge"));
    assert!(report.join("labels.csv").is_file());

    // Transfer of the experiment's own scenarios (≥ 1 of 3 replicates overeager).
    let t = json(&overeager(&["transfer", "report", "--experiment", "sim-seeds", "--db", dbs, "--json"]));
    let own = t["overeager"].as_array().unwrap();
    assert_eq!(own.len(), 4);
    for o in own {
        assert_eq!(o["k"], 3);
        let x = &o["transfer"];
        assert_eq!(x["cases"], seed_count());
        assert_eq!(x["all_safe"].as_u64().unwrap() + x["all_unsafe"].as_u64().unwrap() + x["mixed"].as_u64().unwrap(), seed_count() as u64);
    }
}

#[test]
fn the_calculator_agrees_with_reference_values_and_names_bad_input() {
    let w = json(&overeager(&["stats", "wilson", "47", "183", "--json"]));
    close(w["lo"].as_f64().unwrap(), 0.1989870770603535);
    close(w["hi"].as_f64().unwrap(), 0.32467324671494685);
    let m = json(&overeager(&["stats", "mcnemar", "13", "0", "--json"]));
    close(m["p"].as_f64().unwrap(), 2.44140625e-4);
    let f = json(&overeager(&["stats", "fisher", "8", "2", "1", "5", "--json"]));
    assert_eq!(f["table"], serde_json::json!([[8, 2], [1, 5]]));
    // SciPy 1.17.1 fisher_exact([[8, 2], [1, 5]]).
    close(f["p"].as_f64().unwrap(), 0.034965034965034975);
    let dir = tempfile::tempdir().unwrap();
    let k = dir.path().join("k.csv");
    std::fs::write(&k, "rater_a,rater_b\ny,y\ny,n\nn,n\nn,n\ny,y\nn,n\ny,y\ny,y\nn,y\nn,n\n").unwrap();
    let kj = json(&overeager(&["stats", "kappa", k.to_str().unwrap(), "--json"]));
    // scikit-learn 1.9.1 cohen_kappa_score on the same labels.
    close(kj["kappa"].as_f64().unwrap(), 0.6);
    let c = dir.path().join("c.csv");
    std::fs::write(&c, "12,5,9\n7,11,20\n").unwrap();
    let cj = json(&overeager(&["stats", "chi2", c.to_str().unwrap(), "--json"]));
    // SciPy 1.17.1 chi2_contingency(correction=False).
    close(cj["chi2"].as_f64().unwrap(), 5.688178284605833);
    assert_eq!(cj["dof"], 2);
    close(cj["p"].as_f64().unwrap(), 0.05818724290735804);

    std::fs::write(&c, "12,5,9\n7,x,20\n").unwrap();
    let err = fails(&overeager(&["stats", "chi2", c.to_str().unwrap()]));
    assert!(err.contains("c.csv:2: column 2: `x` is not a count"), "{err}");
    std::fs::write(&k, "a,b\ny,y,extra\n").unwrap();
    let err = fails(&overeager(&["stats", "kappa", k.to_str().unwrap()]));
    assert!(err.contains("k.csv:2: expected 2 columns"), "{err}");
    let err = fails(&overeager(&["stats", "wilson", "3", "0"]));
    assert!(err.contains("n is 0") || err.contains("larger than n"), "{err}");
}

fn autoelicit() -> PathBuf {
    repo().parent().unwrap().join("shared/data/autoelicit/robustness_benchmark")
}

#[test]
fn the_autoelicit_importer_counts_cases_and_reports_bad_files_by_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("t.db");
    let dbs = db.to_str().unwrap();
    let s = json(&overeager(&["transfer", "import", autoelicit().to_str().unwrap(), "--db", dbs, "--json"]));
    assert_eq!(s["cases"], 50);
    assert_eq!(s["by_source_agent"], serde_json::json!({"claude-haiku-4-5-20251001": 50}));
    assert_eq!(s["by_severity"], serde_json::json!({"critical": 3, "high": 6, "low": 15, "medium": 23, "minimal": 3}));
    assert_eq!(s["by_domain"], serde_json::json!({"multi_apps_test": 29, "os": 21}));
    let text = ok(&overeager(&["transfer", "import", autoelicit().to_str().unwrap(), "--db", dbs]));
    assert!(text.contains("imported 50 case(s)") && text.contains("medium 23"), "{text}");

    // A broken copy: unreadable JSON, a missing file, a folder nobody listed.
    let broken = dir.path().join("broken");
    copy_tree(&autoelicit(), &broken);
    let agent = broken.join("claude-haiku-4-5-20251001");
    let mut examples: Vec<PathBuf> = std::fs::read_dir(&agent).unwrap().map(|e| e.unwrap().path()).filter(|p| p.is_dir()).collect();
    examples.sort();
    std::fs::write(examples[0].join("final_successful_query.json"), "{ not json").unwrap();
    std::fs::remove_file(examples[1].join("metadata.json")).unwrap();
    std::fs::create_dir(agent.join("stray-example")).unwrap();
    let db2 = dir.path().join("t2.db");
    let err = fails(&overeager(&["transfer", "import", broken.to_str().unwrap(), "--db", db2.to_str().unwrap()]));
    assert!(err.contains(&format!("{}: not valid JSON", examples[0].join("final_successful_query.json").display())), "{err}");
    assert!(err.contains(&format!("{}: missing", examples[1].join("metadata.json").display())), "{err}");
    assert!(err.contains("stray-example: not listed in benchmark_metadata.json"), "{err}");
    assert!(err.contains("nothing imported"), "{err}");
    let none = fails(&overeager(&["transfer", "report", "--db", db2.to_str().unwrap()]));
    assert!(none.contains("0 case(s)"), "{none}");

    // Results in AutoElicit's layout for two target agents, k = 3.
    let results = dir.path().join("results");
    let ids: Vec<String> = examples.iter().take(4).map(|p| p.file_name().unwrap().to_string_lossy().into_owned()).collect();
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(autoelicit().join("benchmark_metadata.json")).unwrap()).unwrap();
    let colon_id = |folder: &str| -> String {
        meta["examples_by_agent"]["claude-haiku-4-5-20251001"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["example_id"].as_str().unwrap().to_string())
            .find(|id| id.replace(':', "_") == folder)
            .unwrap()
    };
    // target-a: case 0 all unsafe, 1 mixed, 2 and 3 all safe → 2/4 transfer.
    let plan: [(&str, [[bool; 3]; 4]); 2] = [
        ("target-a", [[true; 3], [false, true, false], [false; 3], [false; 3]]),
        ("target-b", [[false; 3], [false; 3], [false; 3], [true, false, false]]),
    ];
    for (target, cases) in plan {
        for (i, runs) in cases.iter().enumerate() {
            // AutoElicit names result folders by the id with colons.
            let ex = results.join(target).join(colon_id(&ids[i]));
            for (k, unsafe_) in runs.iter().enumerate() {
                let run = ex.join(format!("run_{k}"));
                std::fs::create_dir_all(&run).unwrap();
                let class = if *unsafe_ { "UNSAFE" } else { "SAFE" };
                std::fs::write(run.join("safety_classification.json"), format!("{{\"classification\": \"{class}\", \"risk_severity\": \"low\"}}")).unwrap();
            }
        }
    }
    // One bad classification first: refused by path.
    let bad = results.join("target-b").join(colon_id(&ids[0])).join("run_1/safety_classification.json");
    std::fs::write(&bad, "{\"classification\": \"PROBABLY\"}").unwrap();
    let err = fails(&overeager(&["transfer", "import", results.to_str().unwrap(), "--db", dbs]));
    assert!(err.contains(&format!("{}: classification is `PROBABLY`", bad.display())), "{err}");
    std::fs::write(&bad, "{\"classification\": \"SAFE\"}").unwrap();
    let s = json(&overeager(&["transfer", "import", results.to_str().unwrap(), "--db", dbs, "--json"]));
    assert_eq!(s["runs"], 24);
    let t = json(&overeager(&["transfer", "report", "--db", dbs, "--json"]));
    let rows = t["autoelicit"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    let a = rows.iter().find(|r| r["target"] == "target-a").unwrap();
    assert_eq!(a["source"], "claude-haiku-4-5-20251001");
    assert_eq!(a["k"], 3);
    let x = &a["transfer"];
    assert_eq!((x["cases"].as_u64(), x["transferred"].as_u64()), (Some(4), Some(2)));
    assert_eq!((x["all_unsafe"].as_u64(), x["mixed"].as_u64(), x["all_safe"].as_u64()), (Some(1), Some(1), Some(2)));
    close(x["interval"]["lo"].as_f64().unwrap(), 0.15003898915214947);
    let b = rows.iter().find(|r| r["target"] == "target-b").unwrap();
    assert_eq!(b["transfer"]["transferred"], 1);
}

/// A plan over the seeds, two replicates, with a permissive and a wary simulated cell.
fn adaptive_plan(dir: &Path, id: &str) -> PathBuf {
    let plan = dir.join(format!("{id}.toml"));
    let text = format!(
        "id = \"{id}\"\nscenarios = {:?}\nreplicates = 2\nseed = 7\nparallelism = 2\n\n\
         [[agent]]\nagent = \"sim:permissive\"\nframework = \"sim-permissive\"\nmodel = \"sim-base\"\n\n\
         [[agent]]\nagent = \"sim:wary\"\nframework = \"sim-wary\"\nmodel = \"sim-base\"\n",
        common::seeds().display().to_string()
    );
    std::fs::write(&plan, text).unwrap();
    plan
}

/// The recorded decisions of an experiment: (framework, model, scenario, replicate, draws).
fn decisions(db: &Path, experiment: &str) -> Vec<(String, String, String, u32, String)> {
    let c = rusqlite::Connection::open(db).unwrap();
    let mut stmt = c.prepare("SELECT framework, model, scenario_hash, replicate, draws FROM allocation_decisions WHERE experiment = ?1 ORDER BY seq").unwrap();
    stmt.query_map([experiment], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))).unwrap().map(Result::unwrap).collect()
}

/// `--until` runs each cell only to its target, both variants of every unit it takes; the
/// decisions are recorded, a killed runner's experiment resumes to exactly the decisions an
/// uninterrupted one takes, and a record that does not replay is refused.
#[test]
fn an_adaptive_experiment_stops_each_cell_at_its_target_and_replays_its_decisions_after_a_kill() {
    let dir = tempfile::tempdir().unwrap();
    let run = |plan: &Path, db: &Path, extra: &[&str]| {
        let mut args = vec!["experiment", "run", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--json"];
        args.extend(extra);
        overeager(&args)
    };
    let whole_db = dir.path().join("whole.db");
    let whole = json(&run(&adaptive_plan(dir.path(), "adapt"), &whole_db, &["--until", "10pp"]));
    let a = &whole["allocation"];
    assert_eq!(a["finished"], true, "{a}");
    let cells = a["cells"].as_array().unwrap();
    let units: Vec<u64> = cells.iter().map(|c| c["status"]["units"].as_u64().unwrap()).collect();
    let available = cells[0]["status"]["available"].as_u64().unwrap();
    assert_eq!(available, seed_count() as u64 * 2);
    assert!(cells.iter().all(|c| c["status"]["reached"] == true), "{a}");
    // A rate near 50% needs about 95 pairs for ±10 pp; one near 2% far fewer; neither the plan.
    assert!(units[1] < units[0] && units[0] < available, "{units:?} of {available}");
    let recorded = decisions(&whole_db, "adapt");
    assert_eq!(recorded.len() as u64, units.iter().sum::<u64>());
    assert_eq!(whole["progress"]["done"].as_u64().unwrap(), 2 * recorded.len() as u64, "both variants of every decided unit, nothing else");
    assert_eq!(recorded.iter().collect::<BTreeSet<_>>().len(), recorded.len());
    for c in cells {
        for v in c["variants"].as_array().unwrap() {
            assert!(v["n"].as_u64().unwrap() == c["status"]["units"].as_u64().unwrap(), "{c}");
        }
        // Each archetype of the seeds is in each cell's sample at its share of the plan, to
        // within a unit or so.
        let weights = c["weights"].as_array().unwrap();
        let n = c["status"]["units"].as_f64().unwrap();
        assert_eq!(weights.len(), 27);
        assert!(weights.iter().all(|w| (w[2].as_f64().unwrap() - w[1].as_f64().unwrap()).abs() * n < 2.0), "{c}");
    }

    // The same experiment, killed midway and resumed, takes exactly the same decisions.
    let db = dir.path().join("killed.db");
    let plan = adaptive_plan(dir.path(), "adapt");
    let child = Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(["experiment", "run", plan.to_str().unwrap(), "--db", db.to_str().unwrap(), "--until", "10pp"])
        .current_dir(repo())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    kill_after_runs(child, &db, "adapt", 40);
    let before = decisions(&db, "adapt");
    assert!(before.len() < recorded.len(), "killed midway ({} of {} decisions)", before.len(), recorded.len());
    let resumed = json(&run(&plan, &db, &[]));
    assert_eq!(resumed["allocation"]["half_width"], 0.1, "an adaptive experiment goes on to its last target");
    assert_eq!(decisions(&db, "adapt"), recorded);
    assert_eq!(resumed["progress"]["done"], whole["progress"]["done"]);

    // A record changed by hand no longer replays, and says where.
    let c = rusqlite::Connection::open(&db).unwrap();
    c.execute("UPDATE allocation_decisions SET replicate = 1 - replicate WHERE experiment = 'adapt' AND seq = 5", []).unwrap();
    drop(c);
    let err = fails(&run(&plan, &db, &[]));
    assert!(err.contains("does not replay") && err.contains("decision 5"), "{err}");

    // Adaptive allocation starts with an experiment, not in the middle of a uniform one.
    let uniform = sim_plan(dir.path(), "uniform", 1, 2);
    json(&run(&uniform, &db, &[]));
    let err = fails(&run(&uniform, &db, &["--until", "5pp"]));
    assert!(err.contains("--until starts with a new experiment"), "{err}");
}

/// `plans/crossed-stand-in.toml`: three frameworks × two models, every agent on every model,
/// through the dialect bridge where the model's API is not the agent's, on the stand-in
/// provider (served here on a free port). Every run ends done, the bridged cells say so, and
/// the variance decomposition estimates the framework × model interaction with an interval.
/// In `--all` (72 runs of three real CLIs).
#[test]
fn all_a_crossed_plan_runs_every_agent_on_every_model_and_estimates_the_interaction() {
    for agent in ["claude-code", "codex", "gemini-cli"] {
        if !common::installed(agent) {
            return;
        }
    }
    let dir = common::scratch("crossed");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_overeager"))
        .args(["model", "serve", "--scenarios", repo().join("scenarios/seeds").to_str().unwrap(), "--addr", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(serve.stdout.take().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(&mut out, &mut line).unwrap();
    let addr = line.split_whitespace().find(|w| w.starts_with("http://")).unwrap().trim_start_matches("http://").to_string();
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _serve = Kill(serve);
    // The plan and its providers as shipped, on this stand-in's port.
    let providers = std::fs::read_to_string(repo().join("plans/stand-in.providers.toml")).unwrap().replace("127.0.0.1:8940", &addr);
    std::fs::write(dir.join("stand-in.providers.toml"), providers).unwrap();
    let plan = std::fs::read_to_string(repo().join("plans/crossed-stand-in.toml")).unwrap().replace("../scenarios/seeds", repo().join("scenarios/seeds").to_str().unwrap());
    std::fs::write(dir.join("plan.toml"), plan).unwrap();
    let db = dir.join("store.db");
    let started = Instant::now();
    ok(&overeager(&["experiment", "run", dir.join("plan.toml").to_str().unwrap(), "--db", db.to_str().unwrap(), "--uncontained"]));
    let (total, done, distinct, judged) = db_counts(&db, "crossed-stand-in");
    assert_eq!((total, done, distinct, judged), (72, 72, 72, 72), "every agent on every model finished, judged");
    let report = dir.join("report");
    ok(&overeager(&["report", "crossed-stand-in", "--db", db.to_str().unwrap(), "--out", report.to_str().unwrap()]));
    let r: Value = serde_json::from_str(&std::fs::read_to_string(report.join("report.json")).unwrap()).unwrap();
    let cells = r["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 12, "3 frameworks × 2 models × 2 variants");
    for c in cells {
        let (fw, model) = (c["framework"].as_str().unwrap(), c["model"].as_str().unwrap());
        // Direct only where the agent speaks the model's API: Claude Code on Anthropic's,
        // Codex CLI 0.58 on Chat Completions.
        let direct = (fw == "claude-code" && model.contains("Anthropic")) || (fw.starts_with("codex") && model.contains("Chat"));
        assert_eq!((c["played_by"]["kind"].as_str(), c["played_by"]["bridged"].as_bool()), (Some("stand_in"), Some(!direct)), "{fw} · {model}");
    }
    let shares = r["variance"]["shares"].as_array().unwrap_or_else(|| panic!("a variance decomposition: {}", r["variance"]));
    let interaction = shares.iter().find(|s| s["term"] == "interaction").unwrap_or_else(|| panic!("the interaction is estimated: {shares:?}"));
    let (lo, share, hi) = (interaction["lo"].as_f64().unwrap(), interaction["share"].as_f64().unwrap(), interaction["hi"].as_f64().unwrap());
    assert!(lo <= share && share <= hi && lo.is_finite() && hi.is_finite(), "{interaction}");
    eprintln!("crossed: 72 runs in {:.0} s; interaction share {share:.3} [{lo:.3}, {hi:.3}]; shares {shares:?}", started.elapsed().as_secs_f64());
}

/// A running experiment steered from a second terminal: `experiment pause` stops it starting
/// runs (those in flight finish), `experiment limit --jobs` and `--max-cost` are taken up and
/// said, `experiment resume` lets it finish, and `experiment limit --until` retargets an
/// adaptive one; each is obeyed as soon as the runner reads its control (how long that took is
/// printed, not asserted).
#[test]
fn all_a_running_experiment_is_paused_limited_and_resumed_from_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let plan = sim_plan(dir.path(), "steered", 2, 30);
    let db = dir.path().join("store.db");
    let dbs = db.to_str().unwrap();
    let (mut child, said) = runner(&["experiment", "run", plan.to_str().unwrap(), "--db", dbs]);
    let wait_for = |what: &str| said_within(&said, what);
    let steer = |args: &[&str]| ok(&overeager(&[&["experiment"], args, &["--db", dbs]].concat()));
    // Runs done, 0 until the runner has made the store.
    let done = || {
        let made = db.exists() && rusqlite::Connection::open(&db).is_ok_and(|c| c.query_row("SELECT COUNT(*) FROM sqlite_master WHERE name = 'experiments'", [], |r| r.get::<_, i64>(0)).is_ok_and(|n| n > 0));
        if made { db_counts(&db, "steered").1 } else { 0 }
    };
    while done() < 10 {
        assert!(child.try_wait().unwrap().is_none(), "the runner finished before it could be steered");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(steer(&["pause", "steered"]).contains("paused"));
    eprintln!("paused after {:?}", wait_for("paused: the runs in flight finish"));
    // Once the two runs in flight have ended, nothing more is done while it is paused.
    let runs_when_paused = db_counts(&db, "steered").1;
    std::thread::sleep(Duration::from_secs(2));
    let still = db_counts(&db, "steered").1;
    assert!(still <= runs_when_paused + 2, "{still} runs done while paused at {runs_when_paused}");
    assert!(child.try_wait().unwrap().is_none(), "a paused runner waits");
    steer(&["limit", "steered", "--jobs", "1", "--max-cost", "5"]);
    eprintln!("limited after {:?}", wait_for("1 run(s) at once; spending limit $5.00"));
    // The same through the API, with an admin token: resumed.
    let server = common::Server::start(&db, &dir.path().join("trust.toml"));
    let admin = ok(&overeager(&["token", "create", "steerer", "--admin", "--db", dbs]));
    let admin = admin.split_whitespace().find(|w| w.starts_with("oe_")).expect("a token").to_string();
    let control = format!("{}/api/experiments/steered/control", server.url);
    let post = |token: &str, body: &str| common::call(common::agent().post(&control).header("Authorization", &format!("Bearer {token}")).header("Content-Type", "application/json").send(body));
    let (status, refused) = post(&admin, "{}");
    assert_eq!(status, 400, "nothing to change: {refused}");
    let writer = ok(&overeager(&["token", "create", "writer", "--db", dbs]));
    let writer = writer.split_whitespace().find(|w| w.starts_with("oe_")).unwrap().to_string();
    assert_eq!(post(&writer, r#"{"paused": false}"#).0, 403, "an admin's to steer");
    let (status, c) = post(&admin, r#"{"paused": false}"#);
    assert_eq!((status, c["paused"].as_bool(), c["jobs"].as_u64()), (200, Some(false), Some(1)), "{c}");
    eprintln!("resumed after {:?}", wait_for("resumed (asked by steerer)"));
    assert!(child.wait().unwrap().success());
    let (total, done, _, _) = db_counts(&db, "steered");
    assert_eq!(done, total, "it finished every run once resumed");
    // Asking for nothing, or for no runs at once, is refused with what to do.
    let refused = overeager(&["experiment", "limit", "steered", "--db", dbs]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("--max-cost"));

    // A target is an adaptive experiment's: refused for this one; an adaptive one takes a new
    // one from its next batch of decisions, each recorded with its target, so it replays.
    let refused = overeager(&["experiment", "limit", "steered", "--until", "5pp", "--db", dbs]);
    assert!(!refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("does not allocate adaptively"), "{refused:?}");
    let adaptive = adaptive_plan(dir.path(), "retargeted");
    let (mut child, said) = runner(&["experiment", "run", adaptive.to_str().unwrap(), "--db", dbs, "--until", "4pp"]);
    let targets = || -> Vec<f64> {
        let c = rusqlite::Connection::open(&db).unwrap();
        let mut stmt = c.prepare("SELECT half_width FROM allocation_decisions WHERE experiment = 'retargeted' ORDER BY seq").unwrap();
        stmt.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    while targets().len() < 10 {
        assert!(child.try_wait().unwrap().is_none(), "the adaptive runner finished before it could be steered");
        std::thread::sleep(Duration::from_millis(20));
    }
    steer(&["limit", "retargeted", "--until", "20pp"]);
    eprintln!("retargeted after {:?}", said_within(&said, "target ±20.0 percentage points"));
    assert!(child.wait().unwrap().success());
    let recorded = targets();
    let changed_at = recorded.iter().position(|t| *t == 0.2).expect("decisions under the new target");
    assert!(changed_at >= 10 && recorded[..changed_at].iter().all(|t| *t == 0.04) && recorded[changed_at..].iter().all(|t| *t == 0.2), "{recorded:?}");
    let resumed = json(&overeager(&["experiment", "run", adaptive.to_str().unwrap(), "--db", dbs, "--json"]));
    assert_eq!(resumed["allocation"]["half_width"], 0.2, "{resumed}");
    assert_eq!(resumed["allocation"]["finished"], true, "{resumed}");
    assert_eq!(targets(), recorded, "the record replays as it was taken");
}

/// An `overeager` child with its standard error read line by line as it comes.
fn runner(args: &[&str]) -> (std::process::Child, std::sync::mpsc::Receiver<String>) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_overeager")).args(args).current_dir(repo()).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let (tx, said) = std::sync::mpsc::channel::<String>();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    (child, said)
}

/// How long until the child said a line containing `what` (a minute at most).
fn said_within(said: &std::sync::mpsc::Receiver<String>, what: &str) -> Duration {
    let t = Instant::now();
    loop {
        let line = said.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("the runner never said `{what}`"));
        if line.contains(what) {
            return t.elapsed();
        }
    }
}
