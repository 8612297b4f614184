//! Search over runs and their events: a small query language, answered from the store.
//!
//! Each finished run's events are indexed when the run is recorded (a trigram FTS5 table of
//! their command lines, paths and texts), so a query never opens a bundle. A query is terms
//! separated by spaces, all of which must hold:
//!
//! * run fields — `trap:` `severity:` `agent:` `framework:` `model:` `scenario:` `archetype:`
//!   `variant:` `outcome:` — select runs;
//! * event fields — `channel:` `op:` `path:` (a glob; without a `/` it is matched against file
//!   names) `cmd:` (a phrase, case-sensitive) — and free text (a word or a `"phrase"`, found in
//!   command lines, paths, messages and model replies, case-insensitive) must all hold on one
//!   event of the run: the run is listed with those events.
//!
//! A value with spaces is quoted: `cmd:"rm -rf"`. A `-` before a run field excludes.
//!
//! A search costs bounded work: a query has at most [`MAX_TERMS`] terms of at most
//! [`MAX_VALUE_CHARS`] characters; text, `cmd:` and `path:` terms the trigram index cannot
//! narrow (under three characters; a glob with no three-character literal) need a term it can;
//! and a search stops at its deadline, or when its caller gives up, inside SQLite.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use anyhow::Result;
use overeager_core::glob::PathGlob;
use overeager_core::{Event, Op};
use rusqlite::{Transaction, params, params_from_iter};
use serde::Serialize;

use crate::Store;
use crate::runs::{RUN_ROW_SQL, run_row};

pub use overeager_wire::run::{EventHit, RunHit};

/// A field of the query language.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Field {
    Trap,
    Severity,
    Agent,
    Framework,
    Model,
    Scenario,
    Archetype,
    Variant,
    Outcome,
    Channel,
    Op,
    Path,
    Cmd,
}

impl Field {
    /// Every field, in the order the documentation lists them.
    pub const ALL: [Field; 13] = [Field::Trap, Field::Severity, Field::Agent, Field::Framework, Field::Model, Field::Scenario, Field::Archetype, Field::Variant, Field::Outcome, Field::Channel, Field::Op, Field::Path, Field::Cmd];

    /// The field's name in a query.
    pub fn as_str(self) -> &'static str {
        match self {
            Field::Trap => "trap",
            Field::Severity => "severity",
            Field::Agent => "agent",
            Field::Framework => "framework",
            Field::Model => "model",
            Field::Scenario => "scenario",
            Field::Archetype => "archetype",
            Field::Variant => "variant",
            Field::Outcome => "outcome",
            Field::Channel => "channel",
            Field::Op => "op",
            Field::Path => "path",
            Field::Cmd => "cmd",
        }
    }

    /// Whether the field selects events rather than runs.
    pub fn of_events(self) -> bool {
        matches!(self, Field::Channel | Field::Op | Field::Path | Field::Cmd)
    }
}

/// One term of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Term {
    /// Free text, found in an event's command line, paths or text.
    Text(String),
    /// `field:value`, or with `negated`, `-field:value` (run fields only).
    Field { field: Field, value: String, negated: bool },
}

/// A parsed query.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pub terms: Vec<Term>,
}

/// What is wrong with a query, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryError {
    /// The byte offset of the term at fault.
    pub at: usize,
    pub message: String,
}

impl std::fmt::Display for QueryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at character {}: {}", self.at + 1, self.message)
    }
}

impl std::error::Error for QueryError {}

/// The most terms a query may have.
pub const MAX_TERMS: usize = 16;

/// The longest value a term may have, in characters.
pub const MAX_VALUE_CHARS: usize = 256;

/// The fewest characters the trigram index narrows by.
const INDEXED_CHARS: usize = 3;

/// Whether the index can narrow a free-text, `cmd:` or `path:` term (`None` for other terms,
/// which it never does).
fn indexed(t: &Term) -> Option<bool> {
    match t {
        Term::Text(v) | Term::Field { field: Field::Cmd, value: v, .. } => Some(v.chars().count() >= INDEXED_CHARS),
        Term::Field { field: Field::Path, value, .. } => Some(glob_literal(value).chars().count() >= INDEXED_CHARS),
        Term::Field { .. } => None,
    }
}

/// Why a search stopped before it finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchStopped {
    /// It reached its deadline.
    Deadline,
    /// Its caller gave up (the client went away).
    Cancelled,
}

impl std::fmt::Display for SearchStopped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SearchStopped::Deadline => "the search ran out of time",
            SearchStopped::Cancelled => "the search was cancelled",
        })
    }
}

impl std::error::Error for SearchStopped {}

/// When a search must stop: at `deadline`, or as soon as `cancelled` is set.
#[derive(Debug, Clone)]
pub struct Budget {
    pub deadline: Instant,
    pub cancelled: Arc<AtomicBool>,
}

impl Budget {
    /// Why to stop now, if it is time to.
    fn stopped(&self) -> Option<SearchStopped> {
        if self.cancelled.load(Ordering::Relaxed) {
            Some(SearchStopped::Cancelled)
        } else if Instant::now() >= self.deadline {
            Some(SearchStopped::Deadline)
        } else {
            None
        }
    }
}

const OUTCOMES: [&str; 4] = ["overeager", "clean", "incomplete", "timed_out"];
const CHANNELS: [&str; 4] = ["agent", "shell", "fswatch", "net"];

/// Reads a query (see the module documentation).
pub fn parse(q: &str) -> Result<Query, QueryError> {
    if let Some((at, c)) = q.char_indices().find(|(_, c)| c.is_control() && !c.is_whitespace()) {
        return Err(QueryError { at, message: format!("the control character U+{:04X} cannot be searched for; remove it", c as u32) });
    }
    let mut terms = Vec::new();
    let mut starts = Vec::new();
    let chars: Vec<(usize, char)> = q.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].1.is_whitespace() {
            i += 1;
            continue;
        }
        let start = chars[i].0;
        if terms.len() == MAX_TERMS {
            return Err(QueryError { at: start, message: format!("a query has at most {MAX_TERMS} terms; search with fewer") });
        }
        // A quoted string ends at its closing quote; a bare word at white space.
        let read_value = |i: &mut usize| -> Result<String, QueryError> {
            if chars.get(*i).map(|c| c.1) == Some('"') {
                let open = chars[*i].0;
                *i += 1;
                let mut v = String::new();
                while let Some(&(_, c)) = chars.get(*i) {
                    *i += 1;
                    if c == '"' {
                        return Ok(v);
                    }
                    v.push(c);
                }
                Err(QueryError { at: open, message: "a quote is not closed: end the phrase with `\"`".into() })
            } else {
                let mut v = String::new();
                while let Some(&(_, c)) = chars.get(*i).filter(|c| !c.1.is_whitespace()) {
                    v.push(c);
                    *i += 1;
                }
                Ok(v)
            }
        };
        let negated = chars[i].1 == '-' && chars.get(i + 1).is_some_and(|c| c.1.is_ascii_alphabetic());
        let name_from = if negated { i + 1 } else { i };
        let mut j = name_from;
        while chars.get(j).is_some_and(|c| c.1.is_ascii_alphabetic()) {
            j += 1;
        }
        if chars.get(j).map(|c| c.1) == Some(':') && j > name_from {
            let name: String = chars[name_from..j].iter().map(|c| c.1).collect();
            let field = Field::ALL.iter().copied().find(|f| f.as_str() == name).ok_or_else(|| QueryError {
                at: start,
                message: format!("no field `{name}:`; the fields are {} (or search for the text: put it in quotes)", Field::ALL.map(|f| format!("{}:", f.as_str())).join(" ")),
            })?;
            i = j + 1;
            let value = read_value(&mut i)?;
            if value.is_empty() {
                return Err(QueryError { at: start, message: format!("`{name}:` needs a value, e.g. {}", example(field)) });
            }
            if negated && field.of_events() {
                return Err(QueryError { at: start, message: format!("`-{name}:` cannot exclude: events are searched for, not left out; remove the `-`") });
            }
            check_value(field, &value).map_err(|message| QueryError { at: start, message })?;
            terms.push(Term::Field { field, value, negated });
            starts.push(start);
        } else {
            let value = read_value(&mut i)?;
            if !value.is_empty() {
                terms.push(Term::Text(value));
                starts.push(start);
            }
        }
        let value_chars = match terms.last() {
            Some(Term::Text(v) | Term::Field { value: v, .. }) => v.chars().count(),
            None => 0,
        };
        if value_chars > MAX_VALUE_CHARS {
            return Err(QueryError { at: start, message: format!("a term is at most {MAX_VALUE_CHARS} characters, this one {value_chars}; search for a shorter part of it") });
        }
    }
    // A term the index cannot narrow is checked on every event the other terms leave: with no
    // term the index can narrow, that is every event of the store.
    if !terms.iter().any(|t| indexed(t) == Some(true))
        && let Some(k) = terms.iter().position(|t| indexed(t) == Some(false))
    {
        let what = match &terms[k] {
            Term::Field { field: Field::Path, .. } => "a glob with no three characters in a row without a wildcard",
            _ => "a word of fewer than three characters",
        };
        return Err(QueryError {
            at: starts[k],
            message: format!("{what} matches too much to search for alone: give three characters or more (e.g. `.env`, `rm -`), or add a term that has them"),
        });
    }
    Ok(Query { terms })
}

fn example(field: Field) -> &'static str {
    match field {
        Field::Trap => "trap:database-deleted",
        Field::Severity => "severity:critical",
        Field::Agent => "agent:scripted:aggressive",
        Field::Framework => "framework:claude-code",
        Field::Model => "model:scripted-cautious",
        Field::Scenario => "scenario:alembic-broken-revision-keep-db",
        Field::Archetype => "archetype:destructive-cleanup",
        Field::Variant => "variant:stripped",
        Field::Outcome => "outcome:overeager",
        Field::Channel => "channel:shell",
        Field::Op => "op:delete",
        Field::Path => "path:*.env",
        Field::Cmd => "cmd:\"rm -rf\"",
    }
}

fn check_value(field: Field, value: &str) -> Result<(), String> {
    match field {
        Field::Outcome if !OUTCOMES.contains(&value) => Err(format!("outcome `{value}` is not one of {}", OUTCOMES.join(", "))),
        Field::Channel if !CHANNELS.contains(&value) => Err(format!("channel `{value}` is not one of {}", CHANNELS.join(", "))),
        Field::Variant if !["kept", "stripped", "consent_kept", "consent_stripped"].contains(&value) => Err(format!("variant `{value}` is not `kept` or `stripped`")),
        Field::Severity if !["low", "medium", "high", "critical"].contains(&value) => Err(format!("severity `{value}` is not one of low, medium, high, critical")),
        Field::Op if serde_json::from_value::<Op>(serde_json::Value::String(value.to_string())).map(|o| o == Op::Unknown && value != "unknown").unwrap_or(true) => {
            Err(format!("op `{value}` is not an event operation (exec, read, write, create, delete, rename, chmod, attrib, net, message, tool, result, denied, …)"))
        }
        _ => Ok(()),
    }
}

/// The answer to a query.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    /// Runs matching, in all.
    pub total: usize,
    pub runs: Vec<RunHit>,
}

/// Matching events listed per run.
const EVENTS_PER_RUN: usize = 20;

/// The text of an event that search reads: its command line, its paths and its text.
fn event_text(e: &Event) -> (String, String, String) {
    let cmd = e.command.clone().or_else(|| e.argv.as_ref().map(|a| a.join(" "))).unwrap_or_default();
    let paths = e.paths.iter().chain(&e.via).cloned().collect::<Vec<_>>().join("\n");
    (cmd, paths, e.text.clone().unwrap_or_default())
}

/// Indexes a run's events (inside the transaction that records the run).
pub(crate) fn index_events(tx: &Transaction<'_>, run: &str, events: &[Event]) -> Result<()> {
    // Once per run (a run is finished once). The index has no way to find a run's rows other
    // than reading all of them, so nothing is ever deleted from it.
    if tx.execute("INSERT OR IGNORE INTO run_events_indexed (run) VALUES (?1)", [run])? == 0 {
        return Ok(());
    }
    let mut stmt = tx.prepare_cached("INSERT INTO run_events (run, seq, channel, op, cmd, paths, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?;
    for e in events {
        let (cmd, paths, body) = event_text(e);
        if cmd.is_empty() && paths.is_empty() && body.is_empty() {
            continue;
        }
        stmt.execute(params![run, e.seq as i64, e.channel.as_str(), e.op.as_str(), cmd, paths, body])?;
    }
    Ok(())
}

/// An FTS5 string literal.
fn fts_string(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

/// The longest run of characters of a glob with no wildcard in it.
fn glob_literal(glob: &str) -> String {
    glob.split(['*', '?', '[', ']', '{', '}']).max_by_key(|p| p.chars().count()).unwrap_or("").to_string()
}

/// An event-side condition, checked on each candidate event.
enum EventCheck {
    Text(String),
    Channel(String),
    Op(String),
    Path(String),
    Cmd(String),
}

impl EventCheck {
    fn holds(&self, channel: &str, op: &str, cmd: &str, paths: &str, body: &str) -> bool {
        match self {
            EventCheck::Text(t) => {
                let t = t.to_lowercase();
                [cmd, paths, body].iter().any(|s| s.to_lowercase().contains(&t))
            }
            EventCheck::Channel(c) => channel == c,
            EventCheck::Op(o) => op == o,
            EventCheck::Cmd(c) => cmd.contains(c.as_str()),
            EventCheck::Path(g) => {
                // Without a `/`, a glob of file names (`*.env`), as `find -name` takes.
                let by_name = !g.contains('/');
                let glob = PathGlob::new(g);
                paths.lines().any(|p| glob.matches(if by_name { p.rsplit('/').next().unwrap_or(p) } else { p }))
            }
        }
    }
}

impl Store {
    /// Runs matching `q` (of `experiment`, or of every experiment), `limit` of them from
    /// `offset`, in the order runs are listed.
    pub fn search(&self, experiment: Option<&str>, q: &Query, limit: usize, offset: usize) -> Result<SearchResult> {
        self.search_within(experiment, q, limit, offset, None)
    }

    /// [`Store::search`], stopped inside SQLite when `budget` says so: the error is then a
    /// [`SearchStopped`] (find it with `downcast_ref`).
    pub fn search_within(&self, experiment: Option<&str>, q: &Query, limit: usize, offset: usize, budget: Option<&Budget>) -> Result<SearchResult> {
        let Some(budget) = budget else { return self.search_unbounded(experiment, q, limit, offset, None) };
        let interrupt = self.conn.get_interrupt_handle();
        let finished = AtomicBool::new(false);
        let result = std::thread::scope(|scope| {
            // A watchdog interrupts the running statement at the deadline, or as soon as the
            // caller gives up.
            let watchdog = scope.spawn(|| {
                while !finished.load(Ordering::Acquire) {
                    if budget.stopped().is_some() {
                        interrupt.interrupt();
                        return;
                    }
                    std::thread::park_timeout(budget.deadline.saturating_duration_since(Instant::now()).min(std::time::Duration::from_millis(20)));
                }
            });
            let result = self.search_unbounded(experiment, q, limit, offset, Some(budget));
            finished.store(true, Ordering::Release);
            watchdog.thread().unpark();
            result
        });
        match (result, budget.stopped()) {
            (Err(_), Some(why)) => Err(why.into()),
            (result, _) => result,
        }
    }

    fn search_unbounded(&self, experiment: Option<&str>, q: &Query, limit: usize, offset: usize, budget: Option<&Budget>) -> Result<SearchResult> {
        // Run fields: conditions on the run, its scenario and its verdict.
        let mut wheres: Vec<String> = vec!["r.status = 'done'".into()];
        let mut args: Vec<String> = Vec::new();
        if let Some(e) = experiment {
            args.push(e.to_string());
            wheres.push(format!("r.experiment = ?{}", args.len()));
        }
        let mut checks: Vec<EventCheck> = Vec::new();
        let mut matches: Vec<String> = Vec::new();
        for t in &q.terms {
            let (field, value, negated) = match t {
                Term::Text(v) => {
                    if v.chars().count() >= 3 {
                        matches.push(fts_string(v));
                    }
                    checks.push(EventCheck::Text(v.clone()));
                    continue;
                }
                Term::Field { field, value, negated } => (*field, value.clone(), *negated),
            };
            let cond = match field {
                Field::Channel => {
                    checks.push(EventCheck::Channel(value));
                    continue;
                }
                Field::Op => {
                    checks.push(EventCheck::Op(value));
                    continue;
                }
                Field::Cmd => {
                    if value.chars().count() >= 3 {
                        matches.push(format!("cmd : {}", fts_string(&value)));
                    }
                    checks.push(EventCheck::Cmd(value));
                    continue;
                }
                Field::Path => {
                    let lit = glob_literal(&value);
                    if lit.chars().count() >= 3 {
                        matches.push(format!("paths : {}", fts_string(&lit)));
                    }
                    checks.push(EventCheck::Path(value));
                    continue;
                }
                Field::Agent | Field::Framework | Field::Model => {
                    args.push(value);
                    format!("r.{} = ?{}", field.as_str(), args.len())
                }
                Field::Scenario => {
                    args.push(value);
                    format!("(s.id = ?{n} OR s.hash = ?{n})", n = args.len())
                }
                Field::Archetype => {
                    args.push(value);
                    format!("s.archetype = ?{}", args.len())
                }
                Field::Variant => {
                    args.push(if value.starts_with("consent_") { value } else { format!("consent_{value}") });
                    format!("r.variant = ?{}", args.len())
                }
                Field::Outcome => match value.as_str() {
                    "overeager" => "(v.overeager = 1 AND COALESCE(r.timed_out, 0) = 0)".into(),
                    "clean" => "(v.overeager = 0 AND v.complete = 1 AND COALESCE(r.timed_out, 0) = 0)".into(),
                    "incomplete" => "(v.overeager = 0 AND v.complete = 0 AND COALESCE(r.timed_out, 0) = 0)".into(),
                    _ => "COALESCE(r.timed_out, 0) = 1".into(),
                },
                Field::Trap => {
                    args.push(value);
                    format!("EXISTS (SELECT 1 FROM json_each(v.traps) t WHERE json_extract(t.value, '$[0]') = ?{})", args.len())
                }
                Field::Severity => {
                    args.push(value);
                    format!("EXISTS (SELECT 1 FROM json_each(v.traps) t WHERE json_extract(t.value, '$[1]') = ?{})", args.len())
                }
            };
            wheres.push(if negated { format!("NOT {cond}") } else { cond });
        }
        let run_where = format!(" WHERE {}", wheres.join(" AND "));
        if checks.is_empty() {
            let total: i64 = self.conn.query_row(&format!("SELECT COUNT(*) FROM runs r JOIN scenarios s ON s.hash = r.scenario_hash LEFT JOIN verdicts v ON v.run = r.id{run_where}"), params_from_iter(&args), |r| r.get(0))?;
            // SQLite's LIMIT and OFFSET are signed 64-bit.
            let (limit, offset) = (limit.min(i64::MAX as usize), offset.min(i64::MAX as usize));
            let mut stmt = self.conn.prepare(&format!("{RUN_ROW_SQL}{run_where} ORDER BY r.rowid LIMIT {limit} OFFSET {offset}"))?;
            let runs = stmt.query_map(params_from_iter(&args), run_row)?.collect::<Result<Vec<_>, _>>()?;
            return Ok(SearchResult { total: total as usize, runs: runs.into_iter().map(|run| RunHit { run, events: Vec::new(), matched_events: 0 }).collect() });
        }
        // Event fields and free text. The runs the run terms allow, in list order; then the
        // events matching, from the index (trigrams narrow them when a term has three
        // characters or more), checked exactly in SQL (a path glob here), by row id only;
        // the text of the page's events last.
        let mut allowed: HashMap<String, i64> = HashMap::new();
        {
            let mut stmt = self.conn.prepare(&format!("SELECT r.id, r.rowid FROM runs r JOIN scenarios s ON s.hash = r.scenario_hash LEFT JOIN verdicts v ON v.run = r.id{run_where}"))?;
            for row in stmt.query_map(params_from_iter(&args), |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))? {
                let (id, ord) = row?;
                allowed.insert(id, ord);
            }
        }
        let fts = if matches.is_empty() { String::new() } else { format!(" AND run_events MATCH '{}'", matches.join(" AND ").replace('\'', "''")) };
        let mut exact = String::new();
        let mut eargs: Vec<String> = Vec::new();
        for c in &checks {
            let n = eargs.len() + 1;
            match c {
                // A trigram phrase of three characters or more is itself the exact, caseless
                // substring test; a shorter one is checked here.
                EventCheck::Text(t) if t.chars().count() >= 3 => {}
                EventCheck::Text(t) => {
                    eargs.push(t.to_lowercase());
                    exact.push_str(&format!(" AND (instr(lower(cmd), ?{n}) > 0 OR instr(lower(paths), ?{n}) > 0 OR instr(lower(body), ?{n}) > 0)"));
                }
                EventCheck::Cmd(t) => {
                    eargs.push(t.clone());
                    exact.push_str(&format!(" AND instr(cmd, ?{n}) > 0"));
                }
                EventCheck::Channel(v) => {
                    eargs.push(v.clone());
                    exact.push_str(&format!(" AND channel = ?{n}"));
                }
                EventCheck::Op(v) => {
                    eargs.push(v.clone());
                    exact.push_str(&format!(" AND op = ?{n}"));
                }
                EventCheck::Path(_) => {}
            }
        }
        let globs: Vec<&EventCheck> = checks.iter().filter(|c| matches!(c, EventCheck::Path(_))).collect();
        let paths_column = if globs.is_empty() { "''" } else { "paths" };
        // run → (its place in the list, its matching events as (seq, row id)).
        let mut found: HashMap<String, (i64, Vec<(i64, i64)>)> = HashMap::new();
        let mut stmt = self.conn.prepare(&format!("SELECT rowid, run, seq, {paths_column} FROM run_events WHERE 1 = 1{fts}{exact}"))?;
        let mut rows = stmt.query(params_from_iter(&eargs))?;
        while let Some(r) = rows.next()? {
            // Glob checks run here, between SQLite's steps.
            if let Some(why) = budget.and_then(Budget::stopped) {
                return Err(why.into());
            }
            let run: String = r.get(1)?;
            let Some(&ord) = allowed.get(&run) else { continue };
            if !globs.is_empty() {
                let paths: String = r.get(3)?;
                if !globs.iter().all(|g| g.holds("", "", "", &paths, "")) {
                    continue;
                }
            }
            found.entry(run).or_insert_with(|| (ord, Vec::new())).1.push((r.get(2)?, r.get(0)?));
        }
        let total = found.len();
        let mut listed: Vec<(String, (i64, Vec<(i64, i64)>))> = found.into_iter().collect();
        listed.sort_by_key(|(_, (ord, _))| *ord);
        let mut text = self.conn.prepare_cached("SELECT channel, op, cmd, paths, body FROM run_events WHERE rowid = ?1")?;
        let mut one = self.conn.prepare_cached(&format!("{RUN_ROW_SQL} WHERE r.id = ?1"))?;
        let mut runs = Vec::new();
        for (id, (_, mut events)) in listed.into_iter().skip(offset).take(limit) {
            events.sort_unstable();
            let mut hits = Vec::new();
            for &(seq, rowid) in events.iter().take(EVENTS_PER_RUN) {
                let (channel, op, cmd, paths, body): (String, String, String, String, String) = text.query_row([rowid], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?)))?;
                let shown = [cmd, paths, body].into_iter().find(|s| !s.is_empty()).unwrap_or_default();
                hits.push(EventHit { seq: seq as u64, channel, op, text: shown.chars().take(300).collect() });
            }
            if let Some(run) = one.query_map([&id], run_row)?.next().transpose()? {
                runs.push(RunHit { run, events: hits, matched_events: events.len() });
            }
        }
        Ok(SearchResult { total, runs })
    }

    /// Runs recorded before the search index existed (or whose indexing was lost): done, with
    /// a bundle, and no index entry. With their bundle digests.
    pub fn runs_to_index(&self) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare("SELECT r.id, r.bundle FROM runs r WHERE r.status = 'done' AND r.bundle IS NOT NULL AND NOT EXISTS (SELECT 1 FROM run_events_indexed i WHERE i.run = r.id) ORDER BY r.rowid")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?.collect::<Result<Vec<_>, _>>()?;
        Ok(rows)
    }

    /// Indexes the events of a run recorded earlier (see [`Store::runs_to_index`]).
    pub fn index_run_events(&mut self, run: &str, events: &[Event]) -> Result<()> {
        let tx = self.conn.transaction()?;
        index_events(&tx, run, events)?;
        tx.commit()?;
        Ok(())
    }

    /// Indexes every run recorded before the index existed, reading their events from the
    /// object store. How many it indexed, and the runs whose bundle could not be read (left
    /// out of search; `runs_to_index` still lists them).
    pub fn index_missing_runs(&mut self) -> Result<(usize, Vec<String>)> {
        let todo = self.runs_to_index()?;
        let objects = self.objects_dir();
        let mut unreadable = Vec::new();
        let mut done = 0;
        for (run, digest) in &todo {
            match overeager_bundle::read::Bundle::open(&crate::object_path_in(&objects, digest)) {
                Ok(b) => {
                    self.index_run_events(run, &b.events)?;
                    done += 1;
                }
                Err(_) => unreadable.push(run.clone()),
            }
        }
        Ok((done, unreadable))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(f: Field, v: &str) -> Term {
        Term::Field { field: f, value: v.into(), negated: false }
    }

    #[test]
    fn queries_parse_into_terms() {
        let q = parse(r#"cmd:"rm -rf" trap:database-deleted .env -outcome:clean "two words" agent:scripted:aggressive"#).unwrap();
        assert_eq!(
            q.terms,
            [
                field(Field::Cmd, "rm -rf"),
                field(Field::Trap, "database-deleted"),
                Term::Text(".env".into()),
                Term::Field { field: Field::Outcome, value: "clean".into(), negated: true },
                Term::Text("two words".into()),
                field(Field::Agent, "scripted:aggressive"),
            ]
        );
        assert_eq!(parse("  ").unwrap().terms, []);
        // A word with a colon that names no field is an error that says what the fields are.
        let e = parse("ls colour:red").unwrap_err();
        assert_eq!(e.at, 3);
        assert!(e.message.contains("no field `colour:`") && e.message.contains("cmd:"), "{e}");
        assert!(parse("cmd:\"rm -rf").unwrap_err().message.contains("not closed"));
        assert!(parse("outcome:bad").unwrap_err().message.contains("overeager, clean"));
        assert!(parse("op:writes").unwrap_err().message.contains("not an event operation"));
        assert!(parse("-cmd:rm").unwrap_err().message.contains("cannot exclude"));
        assert!(parse("trap:").unwrap_err().message.contains("needs a value"));
        // A quoted colon is text.
        assert_eq!(parse("\"a:b\"").unwrap().terms, [Term::Text("a:b".into())]);
    }

    #[test]
    fn globs_give_their_longest_literal() {
        assert_eq!(glob_literal("**/.env*"), "/.env");
        assert_eq!(glob_literal("*.sql"), ".sql");
        let by_name = EventCheck::Path("*.env*".into());
        assert!(by_name.holds("fswatch", "read", "", "app/.env.staging\nx", ""));
        assert!(!by_name.holds("fswatch", "read", "", "app/env", ""));
        let full = EventCheck::Path("~/.ssh/**".into());
        assert!(full.holds("fswatch", "read", "", "~/.ssh/id_rsa", ""));
        assert!(EventCheck::Cmd("rm -rf".into()).holds("shell", "exec", "sudo rm -rf /", "", ""));
        assert!(!EventCheck::Cmd("rm -rf".into()).holds("shell", "exec", "RM -RF /", "", ""));
        assert!(EventCheck::Text("invoicer".into()).holds("agent", "message", "", "", "The Invoicer DB"));
    }
}
