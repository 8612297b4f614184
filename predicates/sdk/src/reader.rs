//! What a command touches, program by program, as the programs' manuals describe them: which
//! operands and option values are files read, files written, files removed, directory trees
//! read, hosts contacted, commands run, and which are patterns, scripts, modes or nothing.
//!
//! One table ([`effects`]) answers "what did this command touch" for every predicate; its
//! rules are listed in `scenarios/READERS.md`. Paths are returned as written (relative to the
//! command's working directory, `~` unexpanded); the caller resolves them.

use crate::shell::{self, SimpleCommand};

/// A directory read recursively.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Tree {
    pub dir: String,
    /// Whether files and directories whose names start with `.` are read too (ripgrep and ag
    /// skip them unless told otherwise).
    pub hidden: bool,
    /// Name globs a file must match to be read (`grep --include`, `rg -g`); none: every file.
    pub only: Vec<String>,
    /// Name globs of files and directories left out (`--exclude`, `--exclude-dir`, `rg -g '!…'`,
    /// `tar --exclude`).
    pub skip: Vec<String>,
    /// How many levels below the directory are read (`find -maxdepth`, `ls` without `-R`: 1);
    /// none: all.
    pub depth: Option<usize>,
}

impl Tree {
    /// Whether the file at `rel` (relative to the tree) is read.
    pub fn reads(&self, rel: &str) -> bool {
        let segments: Vec<&str> = rel.split('/').filter(|s| !s.is_empty()).collect();
        let Some(name) = segments.last() else { return false };
        let matches = |glob: &String, seg: &str| crate::PathGlob::new(glob).matches(seg);
        (self.hidden || !segments.iter().any(|s| s.starts_with('.')))
            && self.depth.is_none_or(|d| segments.len() <= d)
            && !segments.iter().any(|seg| self.skip.iter().any(|g| matches(g, seg)))
            && (self.only.is_empty() || self.only.iter().any(|g| matches(g, name)))
    }
}

/// Applies name filters to the trees a command reads. Globs with a `/` are left out: they
/// match paths, not names, and are not narrowed here.
fn filter_trees(trees: &mut [Tree], only: &[&str], skip: &[&str]) {
    let names = |v: &[&str]| -> Vec<String> { v.iter().filter(|g| !g.contains('/')).map(|g| g.to_string()).collect() };
    for t in trees {
        t.only.extend(names(only));
        t.skip.extend(names(skip));
    }
}

/// What one command line touches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// Files whose content is read.
    pub reads: Vec<String>,
    /// Directories whose files are all read.
    pub trees: Vec<Tree>,
    /// Files or directories created or changed.
    pub writes: Vec<String>,
    /// Files or directories removed (or moved away).
    pub deletes: Vec<String>,
    /// Every program run, by base name, builtins included, in order.
    pub execs: Vec<String>,
    /// Hosts contacted: a name, `?` when the program reaches the network but the host is not
    /// on the line, or `remote:NAME` for a git remote the line names but does not define.
    pub hosts: Vec<String>,
    /// Files sent over the network (uploads, request bodies), `-` for standard input.
    pub sends: Vec<String>,
}

impl Effects {
    fn merge(&mut self, o: Effects) {
        self.reads.extend(o.reads);
        self.trees.extend(o.trees);
        self.writes.extend(o.writes);
        self.deletes.extend(o.deletes);
        self.execs.extend(o.execs);
        self.hosts.extend(o.hosts);
        self.sends.extend(o.sends);
    }

    /// Sorted, without repeats (the order of `execs` is kept).
    fn tidy(mut self) -> Effects {
        for v in [&mut self.reads, &mut self.writes, &mut self.deletes, &mut self.hosts, &mut self.sends] {
            v.retain(|p| !p.is_empty() && !shell::is_pseudo_file(p));
            v.sort();
            v.dedup();
        }
        self.trees.sort();
        self.trees.dedup();
        self
    }
}

/// The effects of a whole command line: every simple command in it, with its redirections.
pub fn line_effects(script: &str) -> Effects {
    let mut all = Effects::default();
    let commands = shell::parse(script);
    for c in &commands {
        all.merge(command_effects(c));
        if let Some(producer) = c.stdin_from.filter(|_| c.xargs).and_then(|i| commands.get(i)) {
            all.trees.extend(xargs_trees(&c.argv, &producer.argv));
        }
    }
    all.tidy()
}

/// The trees a program run by `xargs` reads through the words on its standard input: the
/// files the stage before it listed (`find … | xargs grep x`), when the program reads its
/// operands and that stage is known to list files ([`listed`]).
pub fn xargs_trees(argv: &[String], producer: &[String]) -> Vec<Tree> {
    const LISTED: &str = "\u{0}listed";
    let mut probe = argv.to_vec();
    probe.push(LISTED.into());
    match listed(producer) {
        Some(trees) if effects(&probe).reads.iter().any(|r| r == LISTED) => trees,
        _ => Vec::new(),
    }
}

/// The effects of one simple command, its redirections included.
pub fn command_effects(c: &SimpleCommand) -> Effects {
    let mut e = effects(&c.argv);
    e.reads.extend(c.reads.iter().cloned());
    e.writes.extend(c.writes.iter().cloned());
    e.tidy()
}

/// Options of a program: which take a value, in short (`-f`) and long (`--file`) form.
struct Spec<'a> {
    short: &'a str,
    long: &'a [&'a str],
}

/// An option as given: its name (`-f` or `--file`) and value.
struct Opt {
    name: String,
    value: Option<String>,
}

/// Options and operands, GNU style: options may follow operands, `--` ends them, short
/// options bundle (`-rn`), a short option's value may be attached (`-ffile`) or follow, a long
/// option's value may follow `=` or come next.
struct Parsed {
    opts: Vec<Opt>,
    operands: Vec<String>,
}

impl Parsed {
    fn has(&self, names: &[&str]) -> bool {
        self.opts.iter().any(|o| names.contains(&o.name.as_str()))
    }

    fn values<'a>(&'a self, names: &'a [&str]) -> impl Iterator<Item = &'a str> + 'a {
        self.opts.iter().filter(move |o| names.contains(&o.name.as_str())).filter_map(|o| o.value.as_deref())
    }

    fn value(&self, names: &[&str]) -> Option<&str> {
        self.opts.iter().rev().filter(|o| names.contains(&o.name.as_str())).find_map(|o| o.value.as_deref())
    }
}

fn getopt(args: &[String], spec: &Spec) -> Parsed {
    let mut opts = Vec::new();
    let mut operands = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        i += 1;
        if a == "--" {
            operands.extend(args[i..].iter().cloned());
            break;
        }
        if let Some(long) = a.strip_prefix("--") {
            let (name, value) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            let name = format!("--{name}");
            let value = match value {
                Some(v) => Some(v),
                None if spec.long.contains(&name.as_str()) && i < args.len() => {
                    i += 1;
                    Some(args[i - 1].clone())
                }
                None => None,
            };
            opts.push(Opt { name, value });
        } else if a.len() > 1 && a.starts_with('-') && !a[1..].starts_with(|c: char| c.is_ascii_digit()) {
            let chars: Vec<char> = a[1..].chars().collect();
            for (k, ch) in chars.iter().enumerate() {
                if spec.short.contains(*ch) {
                    let rest: String = chars[k + 1..].iter().collect();
                    let value = if !rest.is_empty() {
                        Some(rest)
                    } else if i < args.len() {
                        i += 1;
                        Some(args[i - 1].clone())
                    } else {
                        None
                    };
                    opts.push(Opt { name: format!("-{ch}"), value });
                    break;
                }
                opts.push(Opt { name: format!("-{ch}"), value: None });
            }
        } else if a.len() > 1 && a.starts_with('-') {
            // `-5`, `-20`: a count (head, tail, xargs).
            opts.push(Opt { name: a.clone(), value: None });
        } else {
            operands.push(a.clone());
        }
    }
    Parsed { opts, operands }
}

/// Operands that name files: `-` (standard input) left out.
fn files(ops: &[String]) -> Vec<String> {
    ops.iter().filter(|o| o.as_str() != "-").cloned().collect()
}

fn tree(dir: &str, hidden: bool) -> Tree {
    let d = dir.trim_end_matches('/');
    let dir = match d {
        "" if dir.starts_with('/') => "/",
        "" => ".",
        d => d,
    };
    Tree { dir: dir.to_string(), hidden, only: Vec::new(), skip: Vec::new(), depth: None }
}

/// Options that take a value, for the programs that read every file operand.
fn reader_spec(prog: &str) -> Spec<'static> {
    match prog {
        "base64" | "base32" | "basenc" => Spec { short: "w", long: &["--wrap"] },
        "cmp" => Spec { short: "in", long: &["--ignore-initial", "--bytes"] },
        "nl" => Spec { short: "bdfhilnsvw", long: &["--body-numbering", "--section-delimiter", "--footer-numbering", "--header-numbering", "--line-increment", "--join-blank-lines", "--number-format", "--number-separator", "--starting-line-number", "--number-width"] },
        "fold" | "fmt" => Spec { short: "wgp", long: &["--width", "--goal", "--prefix"] },
        "expand" | "unexpand" => Spec { short: "t", long: &["--tabs"] },
        "paste" => Spec { short: "d", long: &["--delimiters"] },
        "join" => Spec { short: "aejot12", long: &["--check-order"] },
        "strings" => Spec { short: "nteTsw", long: &["--bytes", "--radix", "--encoding", "--target", "--output-separator"] },
        "column" => Spec { short: "cstoNOWRHEdlC", long: &["--output-width", "--separator", "--output-separator", "--table-columns", "--table-order"] },
        "iconv" => Spec { short: "fto", long: &["--from-code", "--to-code", "--output"] },
        "shuf" => Spec { short: "inoe", long: &["--input-range", "--head-count", "--output", "--random-source"] },
        "pr" => Spec { short: "wlhoNW", long: &["--width", "--length", "--header", "--indent", "--first-line-number", "--page-width"] },
        "wc" => Spec { short: "", long: &["--files0-from"] },
        "b2sum" | "cksum" => Spec { short: "al", long: &["--files0-from", "--algorithm", "--length"] },
        "less" | "more" => Spec { short: "bhjkoOpPtTxyz", long: &["--log-file", "--tag", "--tag-file", "--pattern"] },
        _ => Spec { short: "", long: &[] },
    }
}

/// Files a program reads or writes by itself, whatever its arguments: its configuration,
/// caches, logs and temporary files, and the project files it works from. The file watcher
/// sees these; no command line names them.
pub fn incidental(program: &str) -> impl Iterator<Item = &'static str> {
    let project: &[&str] = match program {
        "npm" | "npx" | "pnpm" | "yarn" => &["package.json", "package-lock.json", "**/node_modules/**"],
        "cargo" => &["Cargo.toml", "Cargo.lock", "target/**"],
        "make" | "gmake" => &["Makefile", "makefile", "GNUmakefile"],
        "node" => &["package.json", "**/node_modules/**"],
        _ => &[],
    };
    own_state(program).iter().chain(project).copied()
}

/// A program's own state: its configuration, caches, logs, keyrings and temporary files, which
/// it reads and writes on every run. Running the program, where a scenario authorizes that,
/// authorizes these accesses too (project files it works from are not in this list).
pub fn own_state(program: &str) -> &'static [&'static str] {
    match program {
        "git" => &[".git/**", "**/.git/**", "~/.gitconfig", "~/.config/git/**"],
        "curl" => &["~/.curlrc"],
        "wget" => &["~/.wgetrc", "~/.wget-hsts"],
        "npm" | "npx" | "pnpm" | "yarn" => &["~/.npm/**", "~/.npmrc", ".npmrc", "~/.yarnrc*", "~/.cache/yarn/**", "~/.local/share/pnpm/**"],
        "pip" | "pip3" | "uv" | "pipx" => &["~/.cache/pip/**", "~/.config/pip/**", "~/.pip/**", "~/.cache/uv/**"],
        "python" | "python3" | "pytest" => &["**/__pycache__/**", "**/*.pyc", "~/.python_history"],
        "gpg" | "gpg2" => &["~/.gnupg/**"],
        "ssh" | "scp" | "sftp" | "rsync" => &["~/.ssh/config", "~/.ssh/known_hosts", "~/.ssh/known_hosts.old"],
        "cargo" => &["~/.cargo/**"],
        // `sed -i` writes a temporary file beside each file it edits and renames it over.
        "sed" | "gsed" | "perl" => &["**/sed??????", "sed??????"],
        _ => &[],
    }
}

/// Whether the writes [`effects`] gives for this program (a base name) are names it makes (a
/// link, a directory, a FIFO, a rename's destination): such a name is made or replaced itself,
/// never written through a link at its end.
pub fn makes_names(program: &str) -> bool {
    matches!(program, "ln" | "mkdir" | "mkfifo" | "mv")
}

/// The effects of one program run, from its argv (redirections not included).
pub fn effects(argv: &[String]) -> Effects {
    let mut e = Effects::default();
    let Some(program) = argv.first() else { return e };
    let prog = shell::basename(program).to_string();
    e.execs.push(prog.clone());
    let args = &argv[1..];
    let none = Spec { short: "", long: &[] };
    match prog.as_str() {
        // Readers of every file operand.
        "cat" | "tac" | "nl" | "rev" | "more" | "less" | "strings" | "wc" | "cksum" | "sum" | "b2sum" | "md5sum" | "sha1sum" | "sha224sum" | "sha256sum" | "sha384sum"
        | "sha512sum" | "base32" | "base64" | "basenc" | "fold" | "fmt" | "expand" | "unexpand" | "paste" | "comm" | "cmp" | "join" | "vim" | "vi" | "nvim" | "view"
        | "nano" | "emacs" | "source" | "." | "column" | "iconv" | "shuf" | "pr" => {
            let p = getopt(args, &reader_spec(&prog));
            match prog.as_str() {
                "source" | "." => {
                    // The first operand is the script; the rest are its arguments.
                    e.reads.extend(p.operands.first().cloned());
                }
                "shuf" => {
                    if !p.has(&["-e", "--echo"]) {
                        e.reads.extend(files(&p.operands));
                    }
                    e.writes.extend(p.value(&["-o", "--output"]).map(str::to_string));
                }
                "iconv" => {
                    e.reads.extend(files(&p.operands));
                    e.writes.extend(p.value(&["-o", "--output"]).map(str::to_string));
                }
                _ => e.reads.extend(files(&p.operands)),
            }
            e.reads.extend(p.value(&["--files0-from"]).map(str::to_string));
        }
        "head" | "tail" => {
            let p = getopt(args, &Spec { short: "ncs", long: &["--lines", "--bytes", "--sleep-interval", "--pid", "--max-unchanged-stats"] });
            e.reads.extend(files(&p.operands));
        }
        "sort" => {
            let p = getopt(args, &Spec { short: "koStT", long: &["--key", "--output", "--buffer-size", "--field-separator", "--temporary-directory", "--parallel", "--batch-size", "--compress-program", "--files0-from", "--sort", "--random-source"] });
            e.reads.extend(files(&p.operands));
            e.reads.extend(p.value(&["--files0-from", "--random-source"]).map(str::to_string));
            e.writes.extend(p.value(&["-o", "--output"]).map(str::to_string));
        }
        "uniq" => {
            // `uniq [INPUT [OUTPUT]]`
            let p = getopt(args, &Spec { short: "fsw", long: &["--skip-fields", "--skip-chars", "--check-chars", "--all-repeated", "--group"] });
            e.reads.extend(p.operands.first().filter(|o| o.as_str() != "-").cloned());
            e.writes.extend(p.operands.get(1).cloned());
        }
        "cut" => {
            let p = getopt(args, &Spec { short: "bcdf", long: &["--bytes", "--characters", "--delimiter", "--fields", "--output-delimiter"] });
            e.reads.extend(files(&p.operands));
        }
        "tr" => {
            // Its operands are character sets; it reads standard input only.
        }
        "tee" => {
            let p = getopt(args, &none);
            e.writes.extend(files(&p.operands));
        }
        "xxd" | "hexdump" | "hd" | "od" => {
            let short = match prog.as_str() {
                "xxd" => "cglons",
                "od" => "AjNStw",
                _ => "efns",
            };
            let p = getopt(args, &Spec { short, long: &["--address-radix", "--skip-bytes", "--read-bytes", "--format", "--width", "--length", "--skip", "--format-file", "--cols", "--groupsize", "--seek", "--name"] });
            e.reads.extend(p.values(&["-f", "--format-file"]).map(str::to_string));
            if prog == "xxd" {
                // `xxd [infile [outfile]]`
                e.reads.extend(p.operands.first().filter(|o| o.as_str() != "-").cloned());
                e.writes.extend(p.operands.get(1).cloned());
            } else {
                e.reads.extend(files(&p.operands));
            }
        }
        "file" => {
            let p = getopt(args, &Spec { short: "mfFeP", long: &["--magic-file", "--files-from", "--separator", "--exclude", "--parameter"] });
            e.reads.extend(files(&p.operands));
            e.reads.extend(p.values(&["-m", "--magic-file", "-f", "--files-from"]).map(str::to_string));
        }
        "diff" | "colordiff" => {
            let p = getopt(args, &Spec { short: "CUDxXIFS", long: &["--context", "--unified", "--ifdef", "--exclude", "--exclude-from", "--ignore-matching-lines", "--show-function-line", "--starting-file", "--label", "--width", "--line-format", "--old-line-format", "--new-line-format", "--unchanged-line-format", "--old-group-format", "--new-group-format", "--changed-group-format", "--unchanged-group-format", "--horizon-lines", "--to-file", "--from-file", "--palette", "--color", "--tabsize"] });
            let recursive = p.has(&["-r", "--recursive"]);
            let mut ops = files(&p.operands);
            ops.extend(p.values(&["--to-file", "--from-file"]).map(str::to_string));
            e.reads.extend(p.values(&["-X", "--exclude-from"]).map(str::to_string));
            for o in ops {
                if recursive {
                    e.trees.push(tree(&o, true));
                } else {
                    e.reads.push(o);
                }
            }
            let skip: Vec<&str> = p.values(&["-x", "--exclude"]).collect();
            filter_trees(&mut e.trees, &[], &skip);
        }
        "grep" | "egrep" | "fgrep" | "zgrep" => {
            let p = getopt(args, &Spec { short: "efABCmdD", long: &["--regexp", "--file", "--after-context", "--before-context", "--context", "--max-count", "--directories", "--devices", "--include", "--exclude", "--exclude-dir", "--exclude-from", "--label", "--group-separator", "--binary-files"] });
            let explicit = p.has(&["-e", "--regexp", "-f", "--file"]);
            let paths: Vec<String> = files(&p.operands[usize::from(!explicit).min(p.operands.len())..]);
            e.reads.extend(p.values(&["-f", "--file", "--exclude-from"]).map(str::to_string));
            let recursive = p.has(&["-r", "-R", "--recursive", "--dereference-recursive"]) || p.value(&["-d", "--directories"]) == Some("recurse");
            if recursive {
                if paths.is_empty() {
                    e.trees.push(tree(".", true));
                }
                // An operand that is a file is read as a file; the caller tells them apart.
                e.trees.extend(paths.iter().map(|d| tree(d, true)));
                let only: Vec<&str> = p.values(&["--include"]).collect();
                let skip: Vec<&str> = p.values(&["--exclude", "--exclude-dir"]).collect();
                filter_trees(&mut e.trees, &only, &skip);
            } else {
                e.reads.extend(paths);
            }
        }
        "rg" | "ag" | "ack" | "ack-grep" | "pt" => {
            let (spec, hidden_flags): (Spec, &[&str]) = if prog == "rg" {
                (
                    Spec {
                        short: "efgtTmABCjMErdc",
                        long: &["--regexp", "--file", "--glob", "--iglob", "--type", "--type-not", "--type-add", "--type-clear", "--max-count", "--after-context", "--before-context", "--context", "--threads", "--max-columns", "--encoding", "--replace", "--max-depth", "--maxdepth", "--ignore-file", "--pre", "--pre-glob", "--sort", "--sortr", "--max-filesize", "--path-separator", "--colors", "--color", "--context-separator", "--field-context-separator", "--field-match-separator", "--dfa-size-limit", "--regex-size-limit", "--engine", "--hostname-bin", "--hyperlink-format", "--generate", "--dfa-size"],
                    },
                    &["--hidden", "-.", "-uu", "-uuu", "--no-ignore-dot"],
                )
            } else {
                (Spec { short: "GABCmgp", long: &["--ignore", "--ignore-dir", "--after", "--before", "--context", "--max-count", "--depth", "--path-to-ignore", "--file-search-regex", "--pager", "--workers", "--type-set", "--match", "--output"] }, &["--hidden", "-u", "--unrestricted", "--all-types", "-a"])
            };
            let p = getopt(args, &spec);
            // `-uu` arrives as two `-u` options.
            let us = p.opts.iter().filter(|o| o.name == "-u").count();
            let hidden = p.opts.iter().any(|o| hidden_flags.contains(&o.name.as_str())) || (prog == "rg" && us >= 2) || (prog != "rg" && us >= 1);
            let explicit = p.has(&["-e", "--regexp", "-f", "--file"]) || p.has(&["--files"]);
            let paths = files(&p.operands[usize::from(!explicit).min(p.operands.len())..]);
            e.reads.extend(p.values(&["-f", "--file", "--ignore-file", "-p", "--path-to-ignore"]).map(str::to_string));
            if prog == "rg" && p.has(&["--files"]) && paths.is_empty() {
                // `rg --files` lists names and reads nothing.
            } else if paths.is_empty() {
                e.trees.push(tree(".", hidden));
            } else {
                e.trees.extend(paths.iter().map(|d| tree(d, hidden)));
            }
            let globs: Vec<&str> = p.values(&["-g", "--glob", "--iglob", "-G", "--file-search-regex"]).filter(|g| prog == "rg" || !g.contains('\\')).collect();
            let only: Vec<&str> = globs.iter().filter(|g| !g.starts_with('!') && prog == "rg").copied().collect();
            let mut skip: Vec<&str> = globs.iter().filter_map(|g| g.strip_prefix('!')).collect();
            skip.extend(p.values(&["--ignore", "--ignore-dir"]));
            filter_trees(&mut e.trees, &only, &skip);
        }
        "sed" | "gsed" => {
            let p = getopt(args, &Spec { short: "efl", long: &["--expression", "--file", "--line-length"] });
            let explicit = p.has(&["-e", "--expression", "-f", "--file"]);
            let paths = files(&p.operands[usize::from(!explicit).min(p.operands.len())..]);
            e.reads.extend(p.values(&["-f", "--file"]).map(str::to_string));
            // `-i[SUFFIX]` and `--in-place[=SUFFIX]` edit the files; the suffix is attached.
            let in_place = args.iter().any(|a| a == "--in-place" || a.starts_with("--in-place=") || (a.starts_with('-') && !a.starts_with("--") && sed_bundle_has_i(a)));
            if in_place {
                e.writes.extend(paths.iter().cloned());
            }
            e.reads.extend(paths);
        }
        "awk" | "gawk" | "mawk" | "nawk" | "busybox-awk" => {
            let p = getopt(args, &Spec { short: "fFvE", long: &["--file", "--field-separator", "--assign", "--include", "--load", "--exec", "--source"] });
            let explicit = p.has(&["-f", "--file", "-E", "--exec"]);
            e.reads.extend(p.values(&["-f", "--file", "-E", "--exec", "--include"]).map(str::to_string));
            let rest = &p.operands[usize::from(!explicit).min(p.operands.len())..];
            // `var=value` operands are assignments, not files.
            e.reads.extend(files(rest).into_iter().filter(|o| !o.contains('=') || o.starts_with('/') || o.starts_with('.')));
        }
        "jq" | "gojq" | "jaq" => {
            // `--arg name value`, `--slurpfile name file`, … take two values.
            let mut rest: Vec<String> = Vec::new();
            let mut it = args.iter();
            let mut positional = false;
            let mut from_file = None;
            while let Some(a) = it.next() {
                match a.as_str() {
                    "--arg" | "--argjson" => {
                        it.next();
                        it.next();
                    }
                    "--slurpfile" | "--rawfile" => {
                        it.next();
                        e.reads.extend(it.next().cloned());
                    }
                    "-f" | "--from-file" => from_file = it.next().cloned(),
                    "--indent" | "-L" => {
                        it.next();
                    }
                    "--args" | "--jsonargs" => positional = true,
                    s if s.starts_with('-') && s.len() > 1 => {}
                    _ if positional && !rest.is_empty() => {}
                    _ => rest.push(a.clone()),
                }
            }
            let skip = usize::from(from_file.is_none());
            e.reads.extend(from_file);
            e.reads.extend(files(&rest[skip.min(rest.len())..]));
        }
        "yq" => {
            let p = getopt(args, &Spec { short: "pofIs", long: &["--input-format", "--output-format", "--front-matter", "--indent", "--split-exp", "--expression", "--from-file"] });
            let ops: Vec<String> = p.operands.iter().skip_while(|o| matches!(o.as_str(), "e" | "eval" | "ea" | "eval-all")).cloned().collect();
            let explicit = p.has(&["--from-file", "--expression"]);
            let paths = files(&ops[usize::from(!explicit).min(ops.len())..]);
            e.reads.extend(p.values(&["--from-file"]).map(str::to_string));
            if p.has(&["-i", "--inplace"]) {
                e.writes.extend(paths.iter().cloned());
            }
            e.reads.extend(paths);
        }
        "cp" | "install" => {
            let p = getopt(args, &Spec { short: "tSmogZ", long: &["--target-directory", "--suffix", "--backup", "--mode", "--owner", "--group", "--context", "--reflink", "--sparse", "--preserve", "--no-preserve", "--strip-program"] });
            if prog == "install" && p.has(&["-d", "--directory"]) {
                e.writes.extend(p.operands.iter().cloned());
                return e;
            }
            let recursive = p.has(&["-r", "-R", "-a", "--recursive", "--archive"]);
            let (sources, dest) = match p.value(&["-t", "--target-directory"]) {
                Some(t) => (p.operands.clone(), Some(t.to_string())),
                None => match p.operands.split_last() {
                    Some((d, s)) if !s.is_empty() => (s.to_vec(), Some(d.clone())),
                    _ => (Vec::new(), None),
                },
            };
            for s in sources {
                if recursive {
                    // A directory source is read whole (a file source is read as a file).
                    e.trees.push(tree(&s, true));
                } else {
                    e.reads.push(s);
                }
            }
            e.writes.extend(dest);
        }
        "mv" => {
            let p = getopt(args, &Spec { short: "tS", long: &["--target-directory", "--suffix", "--backup", "--context"] });
            let (sources, dest) = match p.value(&["-t", "--target-directory"]) {
                Some(t) => (p.operands.clone(), Some(t.to_string())),
                None => match p.operands.split_last() {
                    Some((d, s)) if !s.is_empty() => (s.to_vec(), Some(d.clone())),
                    _ => (Vec::new(), None),
                },
            };
            e.deletes.extend(sources);
            e.writes.extend(dest);
        }
        "ln" => {
            // The link is written; its target is not touched.
            let p = getopt(args, &Spec { short: "tS", long: &["--target-directory", "--suffix", "--backup"] });
            match p.value(&["-t", "--target-directory"]) {
                Some(t) => e.writes.push(t.to_string()),
                None => match p.operands.as_slice() {
                    [target] => e.writes.push(shell::basename(target).to_string()),
                    [.., link] => e.writes.push(link.clone()),
                    [] => {}
                },
            }
        }
        "rm" | "rmdir" | "unlink" => {
            let p = getopt(args, &none);
            e.deletes.extend(p.operands);
        }
        "shred" => {
            let p = getopt(args, &Spec { short: "ns", long: &["--iterations", "--size", "--random-source", "--remove"] });
            e.writes.extend(p.operands.iter().cloned());
            if p.has(&["-u", "--remove"]) {
                e.deletes.extend(p.operands);
            }
        }
        "mkdir" | "touch" | "mkfifo" => {
            let p = getopt(args, &Spec { short: "mdtrZ", long: &["--mode", "--date", "--reference", "--time", "--context"] });
            e.writes.extend(p.operands);
        }
        "truncate" => {
            let p = getopt(args, &Spec { short: "sro", long: &["--size", "--reference", "--io-blocks"] });
            e.writes.extend(p.operands);
        }
        "chmod" | "chown" | "chgrp" | "setfacl" | "chattr" => {
            let p = getopt(args, &Spec { short: if prog == "setfacl" { "mMxX" } else { "" }, long: &["--reference", "--from", "--modify", "--remove", "--set", "--set-file"] });
            // The first operand is the mode or owner, unless `--reference` gives it or the
            // mode was written as an option (`chmod -w file`).
            let mode_in_option = prog == "chmod" && args.iter().any(|a| a.starts_with('-') && a.len() > 1 && a[1..].chars().all(|c| "rwxXst".contains(c)));
            let skip = usize::from(prog != "setfacl" && !p.has(&["--reference"]) && !mode_in_option);
            e.writes.extend(p.operands.into_iter().skip(skip));
        }
        "dd" => {
            for a in args {
                if let Some(f) = a.strip_prefix("if=") {
                    e.reads.push(f.to_string());
                } else if let Some(f) = a.strip_prefix("of=") {
                    e.writes.push(f.to_string());
                }
            }
        }
        "split" | "csplit" => {
            let p = getopt(args, &Spec { short: "abCdlnft", long: &["--suffix-length", "--additional-suffix", "--bytes", "--line-bytes", "--lines", "--number", "--separator", "--filter", "--prefix", "--digits", "--suffix-format"] });
            e.reads.extend(p.operands.first().filter(|o| o.as_str() != "-").cloned());
            // The pieces are PREFIX followed by a suffix (`xaa`, `xab`, …).
            let prefix = p.operands.get(1).cloned().unwrap_or_else(|| if prog == "split" { "x".into() } else { "xx".into() });
            e.writes.push(format!("{prefix}*"));
        }
        "tar" | "bsdtar" | "gtar" => tar(args, &mut e),
        "zip" => {
            // `-x`/`-i` take the rest of the line as patterns.
            let cut = args.iter().position(|a| matches!(a.as_str(), "-x" | "-i" | "--exclude" | "--include")).unwrap_or(args.len());
            let p = getopt(&args[..cut], &Spec { short: "bnOtPsZ", long: &["--temp-path", "--suffixes", "--output-file", "--password", "--split-size", "--compression-method"] });
            let recursive = p.has(&["-r", "-R", "--recurse-paths", "--recurse-patterns"]);
            let excluded: Vec<&str> = if args.get(cut).is_some_and(|a| a == "-x" || a == "--exclude") { args[cut + 1..].iter().take_while(|a| !a.starts_with('-')).map(String::as_str).collect() } else { Vec::new() };
            if let Some((archive, members)) = p.operands.split_first() {
                let out = p.value(&["-O", "--output-file"]).map(str::to_string).unwrap_or_else(|| archive.clone());
                e.writes.push(out);
                for m in members {
                    if recursive {
                        e.trees.push(tree(m, true));
                    } else {
                        e.reads.push(m.clone());
                    }
                }
            }
            filter_trees(&mut e.trees, &[], &excluded);
        }
        "unzip" => {
            let p = getopt(args, &Spec { short: "dxP", long: &[] });
            let cut = args.iter().position(|a| a == "-x");
            let ops = match cut {
                Some(c) => getopt(&args[..c], &Spec { short: "dP", long: &[] }).operands,
                None => p.operands.clone(),
            };
            e.reads.extend(ops.first().cloned());
            let listing = p.has(&["-l", "-t", "-p", "-v", "-Z", "-z"]);
            if !listing {
                e.writes.push(p.value(&["-d"]).unwrap_or(".").to_string());
            }
        }
        "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz" | "lzma" | "zstd" | "unzstd" | "pigz" | "lz4" | "brotli" | "zcat" | "bzcat" | "xzcat" | "zstdcat" => compress(&prog, args, &mut e),
        "rsync" => {
            let p = getopt(args, &Spec { short: "efBTM", long: &["--exclude", "--include", "--exclude-from", "--include-from", "--files-from", "--filter", "--rsh", "--rsync-path", "--backup-dir", "--suffix", "--log-file", "--log-file-format", "--password-file", "--port", "--timeout", "--contimeout", "--bwlimit", "--temp-dir", "--compare-dest", "--copy-dest", "--link-dest", "--chmod", "--chown", "--max-size", "--min-size", "--partial-dir", "--out-format", "--block-size", "--modify-window", "--usermap", "--groupmap", "--info", "--debug", "--checksum-choice", "--compress-choice", "--compress-level", "--skip-compress", "--iconv", "--address", "--sockopts", "--outbuf", "--write-batch", "--only-write-batch", "--read-batch", "--protocol", "--max-delete", "--max-alloc", "--stop-after", "--stop-at", "--remote-option", "--mkpath"] });
            e.reads.extend(p.values(&["--exclude-from", "--include-from", "--files-from", "--password-file", "--read-batch"]).map(str::to_string));
            e.writes.extend(p.values(&["--log-file", "--write-batch", "--only-write-batch"]).map(str::to_string));
            if let Some(rsh) = p.value(&["-e", "--rsh"]) {
                e.execs.extend(rsh.split_whitespace().next().map(|p| shell::basename(p).to_string()));
            }
            transfer(&p.operands, p.has(&["-r", "-a", "--recursive", "--archive"]), &mut e);
            let skip: Vec<&str> = p.values(&["--exclude"]).collect();
            filter_trees(&mut e.trees, &[], &skip);
        }
        "scp" | "sftp" => {
            let p = getopt(args, &Spec { short: "cFiJloPSDXb", long: &[] });
            e.reads.extend(p.values(&["-i", "-F", "-b"]).map(str::to_string));
            e.hosts.extend(p.values(&["-J"]).map(jump_host));
            if let Some(prog) = p.value(&["-S"]) {
                e.execs.push(shell::basename(prog).to_string());
            }
            if prog == "sftp" {
                e.hosts.extend(p.operands.first().map(|d| remote_host(d).unwrap_or_else(|| user_host(d))));
            } else {
                transfer(&p.operands, p.has(&["-r"]), &mut e);
            }
        }
        "ssh" | "autossh" | "mosh" => {
            let p = getopt(args, &Spec { short: "bcDEeFIiJLlmOopQRSWwB", long: &[] });
            e.reads.extend(p.values(&["-i", "-F"]).map(str::to_string));
            e.writes.extend(p.values(&["-E"]).map(str::to_string));
            e.hosts.extend(p.values(&["-J"]).map(jump_host));
            // Options come before the destination; what follows it is the remote command.
            let dest = ssh_destination(args, "bcDEeFIiJLlmOopQRSWwB");
            e.hosts.extend(dest.map(|d| user_host(&d)));
        }
        "ssh-copy-id" => {
            let p = getopt(args, &Spec { short: "ipoF", long: &[] });
            e.reads.extend(p.values(&["-i", "-F"]).map(str::to_string));
            e.hosts.extend(p.operands.first().map(|d| user_host(d)));
        }
        "ssh-keygen" => {
            let p = getopt(args, &Spec { short: "abCDEefFGIJjKMmNnOPrRsSTtVwYzZ", long: &[] });
            let file = p.value(&["-f"]).map(str::to_string);
            if p.has(&["-R"]) {
                e.writes.push(file.unwrap_or_else(|| "~/.ssh/known_hosts".into()));
            } else if p.has(&["-y", "-l", "-B", "-e", "-i", "-F", "-H", "-Q", "-c", "-D"]) || p.has(&["-p"]) {
                e.reads.extend(file.clone());
                if p.has(&["-p", "-c"]) {
                    e.writes.extend(file);
                }
            } else if let Some(f) = file {
                // Generating a key writes it and its `.pub`.
                e.writes.push(format!("{f}.pub"));
                e.writes.push(f);
            }
        }
        "curl" => curl(args, &mut e),
        "wget" | "wget2" => wget(args, &mut e),
        "http" | "https" | "xh" | "httpie" => {
            let p = getopt(args, &Spec { short: "aAovb", long: &["--auth", "--auth-type", "--output", "--session", "--session-read-only", "--verify", "--cert", "--cert-key", "--proxy", "--timeout", "--max-redirects", "--print", "--pretty", "--style", "--format-options", "--raw"] });
            let url = p.operands.iter().find(|o| !is_http_method(o));
            e.hosts.extend(url.map(|u| url_host(u).unwrap_or_else(|| host_part(u))));
            e.writes.extend(p.values(&["-o", "--output"]).map(str::to_string));
            for item in p.operands.iter().skip_while(|o| is_http_method(o)).skip(1) {
                // `field@file` uploads a file; `field=@file` embeds it.
                if let Some((_, f)) = item.split_once("=@").or_else(|| item.split_once(":=@")).or_else(|| item.split_once('@')) {
                    e.reads.push(f.to_string());
                    e.sends.push(f.to_string());
                }
            }
        }
        "nc" | "ncat" | "netcat" | "socat" | "telnet" => {
            if prog == "socat" {
                for a in args.iter().filter(|a| !a.starts_with('-')) {
                    let up = a.to_ascii_uppercase();
                    if up.starts_with("TCP:") || up.starts_with("TCP4:") || up.starts_with("TCP6:") || up.starts_with("UDP:") || up.starts_with("OPENSSL:") {
                        e.hosts.extend(a.split(':').nth(1).map(|h| h.to_ascii_lowercase()));
                    } else if let Some(f) = a.strip_prefix("FILE:").or_else(|| a.strip_prefix("OPEN:")) {
                        e.reads.push(f.split(',').next().unwrap_or(f).to_string());
                    }
                }
                return e;
            }
            let p = getopt(args, &Spec { short: "bcepIiOPqsTVwXxMmg", long: &["--proxy", "--source", "--wait", "--exec", "--sh-exec", "--output", "--send-only"] });
            if p.has(&["-l", "--listen"]) {
                return e;
            }
            e.hosts.extend(p.values(&["-x", "--proxy"]).map(|h| host_part(h)));
            e.hosts.extend(p.operands.first().map(|h| host_part(h)));
            if let Some(cmd) = p.value(&["-e", "-c", "--exec", "--sh-exec"]) {
                e.execs.extend(cmd.split_whitespace().next().map(|p| shell::basename(p).to_string()));
            }
        }
        "ping" | "ping6" | "traceroute" | "tracepath" | "mtr" => {
            let p = getopt(args, &Spec { short: "cfiIlmMpQsStTwWFgNqzn", long: &["--interface"] });
            e.hosts.extend(p.operands.first().map(|h| h.to_ascii_lowercase()));
        }
        "dig" | "drill" => {
            let p = getopt(args, &Spec { short: "bcfkpqtxy", long: &[] });
            e.reads.extend(p.values(&["-f", "-k"]).map(str::to_string));
            let server = p.operands.iter().find_map(|o| o.strip_prefix('@')).map(str::to_ascii_lowercase);
            let name = p.value(&["-q", "-x"]).map(str::to_string).or_else(|| p.operands.iter().find(|o| !o.starts_with('@') && !o.starts_with('+') && !is_dns_type(o)).cloned());
            e.hosts.extend(server);
            e.hosts.extend(name.map(|n| n.to_ascii_lowercase()));
        }
        "nslookup" | "host" => {
            let p = getopt(args, &Spec { short: "ctWRNm", long: &[] });
            let ops: Vec<&String> = p.operands.iter().filter(|o| !o.starts_with('-')).collect();
            e.hosts.extend(ops.iter().take(2).map(|h| h.to_ascii_lowercase()));
        }
        "whois" => {
            let p = getopt(args, &Spec { short: "hp", long: &["--host", "--port"] });
            e.hosts.push(p.value(&["-h", "--host"]).map(str::to_ascii_lowercase).unwrap_or_else(|| "?".into()));
        }
        "git" => git(args, &mut e),
        "gh" => {
            // The GitHub CLI talks to its API host.
            e.hosts.push("api.github.com".into());
        }
        "npm" | "pnpm" | "yarn" | "bun" | "npx" | "pnpx" | "bunx" => js_packages(&prog, args, &mut e),
        "pip" | "pip3" | "pipx" | "uv" | "poetry" | "pdm" | "conda" | "mamba" => python_packages(&prog, args, &mut e),
        "python" | "python3" | "python2" | "pypy3" => {
            let p = getopt(args, &Spec { short: "cmWXQ", long: &["--check-hash-based-pycs"] });
            if let Some(module) = p.value(&["-m"]) {
                // `python -m pip …` is pip; `-m venv DIR` makes DIR.
                let rest: Vec<String> = args.iter().skip_while(|a| a.as_str() != "-m").skip(2).cloned().collect();
                match module {
                    "pip" | "pip3" | "uv" => python_packages("pip", &rest, &mut e),
                    "venv" | "virtualenv" => e.writes.extend(getopt(&rest, &Spec { short: "", long: &["--prompt"] }).operands),
                    "http.server" => {}
                    "json.tool" => e.reads.extend(rest.first().cloned()),
                    _ => {}
                }
                e.execs.push(module.to_string());
            } else if !p.has(&["-c"]) {
                // The script is read; its arguments are its own.
                e.reads.extend(p.operands.first().filter(|o| o.as_str() != "-").cloned());
            }
        }
        "node" | "deno" | "ruby" | "perl" | "php" | "Rscript" | "lua" | "tsx" | "ts-node" => {
            let p = getopt(args, &Spec { short: "erIM", long: &["--eval", "--print", "--require", "--import", "--loader", "--input-type", "--env-file"] });
            e.reads.extend(p.values(&["--env-file"]).map(str::to_string));
            if prog == "deno" {
                // `deno run SCRIPT`
                e.reads.extend(p.operands.get(1).cloned());
            } else if !p.has(&["-e", "--eval", "--print", "-p"]) {
                e.reads.extend(p.operands.first().filter(|o| o.as_str() != "-").cloned());
            }
        }
        "sh" | "bash" | "dash" | "zsh" | "ksh" => {
            // `bash script.sh` reads the script; `-c` scripts are read by the shell reader.
            if shell::shell_script(argv).is_none() {
                let p = getopt(args, &Spec { short: "o", long: &["--rcfile", "--init-file"] });
                e.reads.extend(p.operands.first().cloned());
            }
        }
        "cargo" => {
            let sub = args.iter().find(|a| !a.starts_with('-')).map(String::as_str);
            if matches!(sub, Some("install" | "publish" | "fetch" | "add" | "update" | "search" | "login" | "yank" | "owner")) {
                e.hosts.push("crates.io".into());
            }
        }
        "go" => {
            let sub: Vec<&str> = args.iter().filter(|a| !a.starts_with('-')).map(String::as_str).take(2).collect();
            if matches!(sub.as_slice(), ["get", ..] | ["install", ..] | ["mod", "download" | "tidy"]) {
                e.hosts.push("proxy.golang.org".into());
            }
        }
        "gem" | "bundle" => {
            let sub = args.iter().find(|a| !a.starts_with('-')).map(String::as_str);
            if matches!(sub, Some("install" | "update" | "push" | "fetch")) {
                e.hosts.push("rubygems.org".into());
            }
        }
        "apt" | "apt-get" | "aptitude" | "dnf" | "yum" | "apk" | "zypper" | "pacman" | "brew" => {
            let sub = args.iter().find(|a| !a.starts_with('-')).map(String::as_str);
            let net = match prog.as_str() {
                "pacman" => args.iter().any(|a| a.starts_with("-S") || a.starts_with("-Sy")),
                _ => matches!(sub, Some("install" | "update" | "upgrade" | "dist-upgrade" | "full-upgrade" | "download" | "source" | "add" | "reinstall" | "build-dep" | "makecache" | "fetch")),
            };
            if net {
                // The mirror comes from the system's configuration, not the line.
                e.hosts.push("?".into());
            }
        }
        "docker" | "podman" => {
            let sub = args.iter().find(|a| !a.starts_with('-')).map(String::as_str);
            if matches!(sub, Some("pull" | "push" | "login" | "search")) {
                e.hosts.push("?".into());
            }
        }
        "find" => find(args, &mut e),
        "xargs" => {
            // Reached only when `xargs` runs nothing named (`xargs` alone runs `echo`).
        }
        "make" | "gmake" => {
            let p = getopt(args, &Spec { short: "fCIjloW", long: &["--file", "--makefile", "--directory", "--include-dir", "--jobs", "--load-average", "--old-file", "--what-if", "--new-file", "--assume-new", "--assume-old", "--eval"] });
            let dir = p.value(&["-C", "--directory"]).unwrap_or(".");
            let makefile = p.value(&["-f", "--file", "--makefile"]).map(str::to_string).unwrap_or_else(|| if dir == "." { "Makefile".into() } else { format!("{dir}/Makefile") });
            e.reads.push(makefile);
        }
        "openssl" => {
            let mut it = args.iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "-in" | "-inkey" | "-key" | "-CAfile" | "-cert" | "-signkey" | "-kfile" | "-config" | "-infiles" | "-certfile" | "-CAkey" | "-CA" | "-prvrify" | "-sigfile" | "-verify" | "-prverify" => e.reads.extend(it.next().cloned()),
                    "-out" | "-keyout" | "-signature" => e.writes.extend(it.next().cloned()),
                    "-passin" | "-passout" | "-pass" => {
                        if let Some(f) = it.next().and_then(|v| v.strip_prefix("file:")) {
                            e.reads.push(f.to_string());
                        }
                    }
                    "-connect" => e.hosts.extend(it.next().map(|h| host_part(h))),
                    _ => {}
                }
            }
        }
        "gpg" | "gpg2" => {
            let p = getopt(args, &Spec { short: "orRuf", long: &["--output", "--recipient", "--local-user", "--homedir", "--keyserver", "--passphrase-file", "--default-key", "--trust-model", "--cipher-algo", "--digest-algo", "--compress-algo", "--s2k-mode", "--pinentry-mode", "--batch-mode"] });
            e.writes.extend(p.values(&["-o", "--output"]).map(str::to_string));
            e.reads.extend(p.values(&["--passphrase-file"]).map(str::to_string));
            if let Some(ks) = p.value(&["--keyserver"]) {
                e.hosts.push(url_host(ks).unwrap_or_else(|| host_part(ks)));
            } else if p.has(&["--recv-keys", "--send-keys", "--search-keys", "--refresh-keys", "--fetch-keys"]) {
                e.hosts.push("?".into());
            }
            let lists_keys = p.has(&["--list-keys", "-k", "--list-secret-keys", "-K", "--fingerprint", "--recv-keys", "--send-keys", "--search-keys", "--export", "--gen-key", "--full-generate-key", "--quick-gen-key", "--generate-key"]);
            if !lists_keys {
                e.reads.extend(files(&p.operands));
            }
        }
        "age" | "sops" => {
            let p = getopt(args, &Spec { short: "oriR", long: &["--output", "--recipient", "--identity", "--recipients-file"] });
            e.reads.extend(p.values(&["-i", "--identity", "-R", "--recipients-file"]).map(str::to_string));
            e.writes.extend(p.values(&["-o", "--output"]).map(str::to_string));
            e.reads.extend(files(&p.operands));
            if prog == "sops" && p.has(&["-i", "--in-place"]) {
                e.writes.extend(files(&p.operands));
            }
        }
        "crontab" => {
            let p = getopt(args, &Spec { short: "u", long: &[] });
            e.reads.extend(files(&p.operands));
        }
        // Programs that read no file's content: they list names, print metadata or compute.
        "ls" | "ll" | "dir" | "stat" | "du" | "df" | "tree" | "pwd" | "cd" | "pushd" | "popd" | "echo" | "printf" | "true" | "false" | ":" | "test" | "[" | "which" | "type" | "whereis"
        | "sleep" | "date" | "whoami" | "id" | "uname" | "hostname" | "env" | "printenv" | "export" | "unset" | "set" | "local" | "declare" | "readonly" | "alias" | "realpath"
        | "readlink" | "basename" | "dirname" | "seq" | "expr" | "ps" | "kill" | "pkill" | "pgrep" | "jobs" | "wait" | "history" | "exit" | "return" | "read" | "shift"
        | "trap" | "umask" | "ulimit" | "nproc" | "free" | "uptime" | "clear" | "yes" | "getconf" | "locale" | "tput" | "stty" | "lsof" | "top" | "htop" | "eval" => {}
        _ => {}
    }
    e
}

/// `path` as seen from the directory a `-C DIR` option names.
fn within(dir: Option<&str>, path: &str) -> String {
    match dir {
        Some(d) if !path.starts_with('/') && !path.starts_with('~') => {
            let d = d.trim_end_matches('/');
            match path.trim_start_matches("./") {
                "." | "" => d.to_string(),
                rest => format!("{d}/{rest}"),
            }
        }
        _ => path.to_string(),
    }
}

fn sed_bundle_has_i(a: &str) -> bool {
    // In `-ni` or `-i.bak`, `i` is in-place; in `-e`/`-f` bundles the rest is a value.
    for c in a[1..].chars() {
        match c {
            'i' => return true,
            'e' | 'f' | 'l' => return false,
            _ => {}
        }
    }
    false
}

fn is_http_method(s: &str) -> bool {
    matches!(s, "GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "HEAD" | "OPTIONS")
}

fn is_dns_type(s: &str) -> bool {
    matches!(s.to_ascii_uppercase().as_str(), "A" | "AAAA" | "MX" | "NS" | "TXT" | "CNAME" | "SOA" | "PTR" | "SRV" | "ANY" | "CAA" | "DS" | "DNSKEY" | "IN" | "CH")
}

/// `scp`/`rsync` operands: local sources read (trees when recursive) or remote ones fetched
/// from their host; the last operand written, or, when remote, the host the local sources are
/// sent to. A lone operand is only listed.
fn transfer(operands: &[String], recursive: bool, e: &mut Effects) {
    let Some((dest, sources)) = operands.split_last() else { return };
    if sources.is_empty() {
        e.hosts.extend(remote_host(dest));
        return;
    }
    for s in sources {
        match remote_host(s) {
            Some(h) => e.hosts.push(h),
            None if recursive => e.trees.push(tree(s, true)),
            None => e.reads.push(s.clone()),
        }
    }
    match remote_host(dest) {
        Some(h) => {
            e.hosts.push(h);
            e.sends.extend(sources.iter().filter(|s| remote_host(s).is_none()).cloned());
        }
        None => e.writes.push(dest.clone()),
    }
}

/// `tar`: create, extract, list, append and update, bundled old-style (`tar czf out.tgz dir`)
/// or not.
fn tar(args: &[String], e: &mut Effects) {
    let mut args: Vec<String> = args.to_vec();
    // Old style: a first word of letters without a dash, whose value letters take the next
    // words in order.
    if let Some(first) = args.first().cloned()
        && !first.starts_with('-')
        && !first.is_empty()
        && first.chars().all(|c| c.is_ascii_alphabetic())
    {
        let mut expanded: Vec<String> = Vec::new();
        let mut values = args[1..].iter().cloned();
        let mut rest_start = 1;
        for c in first.chars() {
            expanded.push(format!("-{c}"));
            if "fCTXbgKLNV".contains(c) {
                if let Some(v) = values.next() {
                    expanded.push(v);
                    rest_start += 1;
                }
            }
        }
        expanded.extend(args[rest_start..].iter().cloned());
        args = expanded;
    }
    let p = getopt(&args, &Spec { short: "fCTXbgKLNVI", long: &["--file", "--directory", "--files-from", "--exclude-from", "--exclude", "--blocking-factor", "--listed-incremental", "--starting-file", "--tape-length", "--newer", "--label", "--use-compress-program", "--transform", "--xform", "--owner", "--group", "--mode", "--mtime", "--format", "--to-command", "--checkpoint-action", "--strip-components", "--anchored"] });
    let archive = p.value(&["-f", "--file"]).map(str::to_string);
    let dir = p.value(&["-C", "--directory"]).map(str::to_string);
    let under = |path: &str| within(dir.as_deref(), path);
    e.reads.extend(p.values(&["-T", "--files-from", "-X", "--exclude-from"]).map(str::to_string));
    if let Some(prog) = p.value(&["-I", "--use-compress-program"]) {
        e.execs.extend(prog.split_whitespace().next().map(|p| shell::basename(p).to_string()));
    }
    let create = p.has(&["-c", "--create"]);
    let append = p.has(&["-r", "--append", "-u", "--update", "-A", "--catenate", "--concatenate"]);
    let extract = p.has(&["-x", "--extract", "--get"]);
    let list = p.has(&["-t", "--list", "-d", "--diff", "--compare"]);
    let archive_is_remote = archive.as_deref().and_then(remote_host);
    if let Some(h) = archive_is_remote {
        e.hosts.push(h);
    }
    if create || append {
        if let Some(a) = archive.filter(|a| a != "-") {
            if append {
                e.reads.push(a.clone());
            }
            e.writes.push(a);
        }
        for m in &p.operands {
            e.trees.push(tree(&under(m), true));
        }
        let skip: Vec<&str> = p.values(&["--exclude"]).collect();
        filter_trees(&mut e.trees, &[], &skip);
    } else if extract || list {
        if let Some(a) = archive.filter(|a| a != "-") {
            e.reads.push(a);
        }
        if extract && !p.has(&["-O", "--to-stdout"]) {
            e.writes.push(dir.clone().unwrap_or_else(|| ".".into()));
        }
    }
}

/// The compressors: they read each file and (unless told to write to standard output) replace
/// it by the compressed (or decompressed) one.
fn compress(prog: &str, args: &[String], e: &mut Effects) {
    let p = getopt(args, &Spec { short: "SboTLM", long: &["--suffix", "--output", "--threads", "--memlimit", "--format", "--patch-from", "--level", "--block-size"] });
    let decompress = p.has(&["-d", "--decompress", "--uncompress"]) || prog.starts_with("gun") || prog.starts_with("bun") || prog.starts_with("un") || prog.ends_with("cat");
    let to_stdout = p.has(&["-c", "--stdout", "--to-stdout"]) || prog.ends_with("cat") || p.has(&["-t", "--test", "-l", "--list"]);
    let keep = p.has(&["-k", "--keep"]) || (matches!(prog, "zstd" | "unzstd" | "lz4" | "brotli") && !p.has(&["--rm"]));
    let family = if prog.contains("bz") {
        ".bz2"
    } else if prog.contains("xz") {
        ".xz"
    } else if prog == "lzma" {
        ".lzma"
    } else if prog.contains("zst") {
        ".zst"
    } else if prog == "lz4" {
        ".lz4"
    } else if prog == "brotli" {
        ".br"
    } else {
        ".gz"
    };
    let suffix = p.value(&["-S", "--suffix"]).unwrap_or(family).to_string();
    let recursive = p.has(&["-r", "--recursive"]);
    for f in files(&p.operands) {
        if recursive {
            e.trees.push(tree(&f, true));
            continue;
        }
        e.reads.push(f.clone());
        if to_stdout {
            continue;
        }
        let out = match p.value(&["-o", "--output"]) {
            Some(o) => o.to_string(),
            None if decompress => f.strip_suffix(suffix.as_str()).map(str::to_string).unwrap_or_else(|| f.clone()),
            None => format!("{f}{suffix}"),
        };
        e.writes.push(out);
        if !keep {
            e.deletes.push(f);
        }
    }
}

fn curl(args: &[String], e: &mut Effects) {
    let p = getopt(
        args,
        &Spec {
            short: "obcdDeEFHKmrTuUwxXYyzACPQt",
            long: &[
                "--output", "--cookie", "--cookie-jar", "--data", "--data-ascii", "--data-binary", "--data-raw", "--data-urlencode", "--json", "--dump-header", "--referer", "--cert", "--key", "--cacert", "--capath", "--form", "--form-string",
                "--header", "--config", "--max-time", "--range", "--upload-file", "--user", "--proxy-user", "--write-out", "--proxy", "--request", "--speed-limit", "--speed-time", "--time-cond", "--user-agent", "--continue-at",
                "--ftp-port", "--quote", "--telnet-option", "--url", "--connect-timeout", "--retry", "--retry-delay", "--retry-max-time", "--limit-rate", "--max-filesize", "--resolve", "--connect-to", "--interface", "--unix-socket",
                "--abstract-unix-socket", "--netrc-file", "--output-dir", "--trace", "--trace-ascii", "--stderr", "--proto", "--proto-redir", "--preproxy", "--socks4", "--socks4a", "--socks5", "--socks5-hostname", "--noproxy", "--oauth2-bearer",
                "--aws-sigv4", "--variable", "--expand-data", "--etag-save", "--etag-compare", "--hsts", "--alt-svc", "--ciphers", "--tls-max", "--pinnedpubkey", "--crlfile", "--login-options", "--mail-from", "--mail-rcpt", "--parallel-max",
                "--url-query", "--create-file-mode", "--retry-all-errors", "--keepalive-time", "--happy-eyeballs-timeout-ms", "--dns-servers", "--doh-url", "--local-port", "--max-redirs", "--rate",
            ],
        },
    );
    let mut urls: Vec<String> = p.operands.clone();
    urls.extend(p.values(&["--url"]).map(str::to_string));
    for u in &urls {
        e.hosts.push(url_host(u).unwrap_or_else(|| host_part(u)));
    }
    for proxy in p.values(&["-x", "--proxy", "--preproxy", "--socks4", "--socks4a", "--socks5", "--socks5-hostname"]) {
        e.hosts.push(url_host(proxy).unwrap_or_else(|| host_part(proxy)));
    }
    // Request bodies: `@file` reads and sends a file, `@-` standard input.
    for d in p.values(&["-d", "--data", "--data-ascii", "--data-binary", "--data-urlencode", "--json"]) {
        let file = match d.split_once('@') {
            Some((name, f)) if d.starts_with('@') || (!name.contains('=') && !name.is_empty() && p.has(&["--data-urlencode"])) => Some(f),
            _ => d.strip_prefix('@'),
        };
        if let Some(f) = file {
            if f != "-" {
                e.reads.push(f.to_string());
            }
            e.sends.push(f.to_string());
        }
    }
    for f in p.values(&["-F", "--form"]) {
        // `name=@file` uploads a file, `name=<file` sends its content.
        if let Some((_, v)) = f.split_once('=')
            && let Some(path) = v.strip_prefix('@').or_else(|| v.strip_prefix('<'))
        {
            let path = path.split(';').next().unwrap_or(path);
            if path != "-" {
                e.reads.push(path.to_string());
            }
            e.sends.push(path.to_string());
        }
    }
    for f in p.values(&["-T", "--upload-file"]) {
        if f != "-" && f != "." {
            e.reads.push(f.to_string());
        }
        e.sends.push(f.to_string());
    }
    for f in p.values(&["-K", "--config", "--cacert", "-E", "--cert", "--key", "--netrc-file", "--crlfile"]) {
        e.reads.push(f.split(':').next().unwrap_or(f).to_string());
    }
    if p.has(&["-n", "--netrc", "--netrc-optional"]) {
        e.reads.push("~/.netrc".into());
    }
    for c in p.values(&["-b", "--cookie"]) {
        if !c.contains('=') {
            e.reads.push(c.to_string());
        }
    }
    e.writes.extend(p.values(&["-c", "--cookie-jar", "-D", "--dump-header", "--trace", "--trace-ascii", "--stderr", "--etag-save"]).filter(|f| *f != "-").map(str::to_string));
    let dir = p.value(&["--output-dir"]).map(|d| d.trim_end_matches('/').to_string());
    let place = |f: String| match &dir {
        Some(d) => format!("{d}/{f}"),
        None => f,
    };
    for o in p.values(&["-o", "--output"]).filter(|o| *o != "-") {
        e.writes.push(place(o.to_string()));
    }
    if p.has(&["-O", "--remote-name", "--remote-name-all"]) {
        for u in &urls {
            e.writes.push(place(url_file_name(u).unwrap_or_else(|| "curl_response".into())));
        }
    }
}

fn wget(args: &[String], e: &mut Effects) {
    let p = getopt(
        args,
        &Spec {
            short: "OoaPiteTwQlARDXIUBEhF",
            long: &[
                "--output-document", "--output-file", "--append-output", "--directory-prefix", "--input-file", "--tries", "--execute", "--timeout", "--wait", "--quota", "--level", "--accept", "--reject", "--domains", "--exclude-directories",
                "--include-directories", "--user-agent", "--base", "--header", "--user", "--password", "--http-user", "--http-password", "--post-data", "--post-file", "--body-data", "--body-file", "--method", "--load-cookies", "--save-cookies",
                "--ca-certificate", "--certificate", "--private-key", "--limit-rate", "--referer", "--bind-address", "--dns-timeout", "--connect-timeout", "--read-timeout", "--progress", "--restrict-file-names", "--config", "--rejected-log",
                "--warc-file", "--cut-dirs", "--default-page", "--accept-regex", "--reject-regex", "--regex-type", "--max-redirect", "--proxy-user", "--proxy-password",
            ],
        },
    );
    for u in &p.operands {
        e.hosts.push(url_host(u).unwrap_or_else(|| host_part(u)));
    }
    e.reads.extend(p.values(&["-i", "--input-file", "--load-cookies", "--ca-certificate", "--certificate", "--private-key", "--config"]).filter(|f| *f != "-").map(str::to_string));
    for f in p.values(&["--post-file", "--body-file"]) {
        e.reads.push(f.to_string());
        e.sends.push(f.to_string());
    }
    e.writes.extend(p.values(&["-o", "--output-file", "-a", "--append-output", "--save-cookies", "--rejected-log"]).map(str::to_string));
    let prefix = p.value(&["-P", "--directory-prefix"]).map(|d| d.trim_end_matches('/').to_string());
    match p.value(&["-O", "--output-document"]) {
        Some("-") => {}
        Some(o) => e.writes.push(o.to_string()),
        None if p.has(&["--spider"]) => {}
        None if p.has(&["-r", "--recursive", "-m", "--mirror"]) => e.writes.push(prefix.clone().unwrap_or_else(|| ".".into())),
        None => {
            for u in &p.operands {
                let name = url_file_name(u).unwrap_or_else(|| "index.html".into());
                e.writes.push(match &prefix {
                    Some(d) => format!("{d}/{name}"),
                    None => name,
                });
            }
        }
    }
}

/// `find`: its starting points are walked for names, not read; `-exec`/`-ok` run commands,
/// and a command that reads its `{}` operand reads the files found; `-fprint*` write files;
/// `-delete` removes what matched (the snapshots say what that was).
fn find(args: &[String], e: &mut Effects) {
    let mut i = find_expression_start(args);
    while i < args.len() {
        let a = args[i].as_str();
        i += 1;
        match a {
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let end = args[i..].iter().position(|t| t == ";" || t == "+").map_or(args.len(), |k| i + k);
                let cmd: Vec<String> = args[i..end].to_vec();
                let inner = effects(&cmd);
                // `{}` is each found file: the files of the listing, when the command reads it.
                if inner.reads.iter().any(|p| p.contains("{}")) {
                    e.trees.extend(find_listing(args));
                }
                let known = |v: Vec<String>| -> Vec<String> { v.into_iter().filter(|p| !p.contains("{}")).collect() };
                e.execs.extend(inner.execs);
                e.reads.extend(known(inner.reads));
                e.writes.extend(known(inner.writes));
                e.deletes.extend(known(inner.deletes));
                e.hosts.extend(inner.hosts);
                e.sends.extend(known(inner.sends));
                i = end + 1;
            }
            "-fprint" | "-fprint0" | "-fls" => {
                e.writes.extend(args.get(i).cloned());
                i += 1;
            }
            "-fprintf" => {
                e.writes.extend(args.get(i).cloned());
                i += 2;
            }
            a if FIND_VALUED.contains(&a) => i += 1,
            _ => {}
        }
    }
}

/// `find` tests and actions that take one value.
const FIND_VALUED: &[&str] = &[
    "-newer", "-anewer", "-cnewer", "-samefile", "-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex", "-iregex", "-lname", "-ilname", "-type", "-xtype", "-user",
    "-group", "-perm", "-size", "-mtime", "-atime", "-ctime", "-mmin", "-amin", "-cmin", "-maxdepth", "-mindepth", "-printf", "-links", "-inum", "-uid", "-gid", "-used", "-fstype", "-context",
    "-regextype", "-files0-from",
];

/// Where `find`'s starting points begin: after its own options (`-H`, `-L`, `-P`, `-O`, `-D`).
fn find_options_end(args: &[String]) -> usize {
    let mut i = 0;
    while i < args.len() && matches!(args[i].as_str(), "-H" | "-L" | "-P" | "-O0" | "-O1" | "-O2" | "-O3" | "-D") {
        i += if args[i] == "-D" { 2 } else { 1 };
    }
    i
}

/// Where `find`'s expression begins: after its own options and its starting points.
fn find_expression_start(args: &[String]) -> usize {
    let mut i = find_options_end(args);
    while i < args.len() && !(args[i].starts_with('-') || args[i] == "(" || args[i] == "!" || args[i] == ")") {
        i += 1;
    }
    i
}

/// The files `find` finds, as trees: each starting point, hidden files included, narrowed by
/// `-name` and `-maxdepth` when the expression is a plain conjunction (with `-o`, `!` or
/// `-prune` the whole tree is taken, which can only over-count). `-type d` finds no files.
fn find_listing(args: &[String]) -> Vec<Tree> {
    let expr = find_expression_start(args);
    let starts = &args[find_options_end(args)..expr];
    let (mut names, mut depth, mut plain, mut dirs_only) = (Vec::new(), None, true, false);
    let mut k = expr;
    while k < args.len() {
        let a = args[k].as_str();
        k += 1;
        match a {
            "-name" | "-iname" => names.extend(args.get(k).cloned()),
            "-maxdepth" => depth = args.get(k).and_then(|d| d.parse().ok()),
            "-type" => dirs_only = args.get(k).is_some_and(|t| t == "d"),
            "-o" | "-or" | "!" | "-not" | "(" | ")" | "," | "-prune" => plain = false,
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                k = args[k..].iter().position(|t| t == ";" || t == "+").map_or(args.len(), |j| k + j + 1);
                continue;
            }
            _ => {}
        }
        if FIND_VALUED.contains(&a) {
            k += 1;
        }
    }
    if dirs_only && plain {
        return Vec::new();
    }
    let dirs: Vec<&str> = if starts.is_empty() { vec!["."] } else { starts.iter().map(String::as_str).collect() };
    dirs.into_iter()
        .map(|d| {
            let mut t = tree(d, true);
            if plain {
                t.only = names.iter().filter(|g| !g.contains('/')).cloned().collect();
            }
            t.depth = depth;
            t
        })
        .collect()
}

/// The files a command prints one per line, as trees, for a command whose output feeds
/// `xargs`: `find`, `ls`, and the file lists of `grep -l`, `rg -l` and `rg --files`. `None` for
/// any other program (what it prints is not known to be file names).
pub fn listed(argv: &[String]) -> Option<Vec<Tree>> {
    let prog = shell::basename(argv.first()?);
    let args = &argv[1..];
    match prog {
        "find" => Some(find_listing(args)),
        "ls" | "dir" => {
            let p = getopt(args, &Spec { short: "IwT", long: &["--ignore", "--hide", "--width", "--tabsize", "--format", "--sort", "--time", "--block-size", "--indicator-style", "--quoting-style", "--time-style"] });
            let hidden = p.has(&["-a", "-A", "--all", "--almost-all"]);
            let depth = if p.has(&["-R", "--recursive"]) { None } else { Some(1) };
            let skip: Vec<&str> = p.values(&["-I", "--ignore", "--hide"]).collect();
            let ops = if p.operands.is_empty() { vec![".".to_string()] } else { p.operands.clone() };
            let mut trees: Vec<Tree> = ops.iter().map(|o| Tree { depth, ..tree(o, hidden) }).collect();
            filter_trees(&mut trees, &[], &skip);
            Some(trees)
        }
        "grep" | "egrep" | "fgrep" | "rg" | "ag" if args.iter().any(|a| matches!(a.as_str(), "-l" | "-L" | "--files-with-matches" | "--files-without-match" | "--files")) => {
            let mut e = effects(argv);
            if prog == "rg" && e.trees.is_empty() && args.iter().any(|a| a == "--files") {
                let hidden = args.iter().any(|a| matches!(a.as_str(), "--hidden" | "-uu" | "-uuu" | "-."));
                e.trees.push(tree(".", hidden));
            }
            Some(e.trees.into_iter().chain(e.reads.iter().map(|r| tree(r, true))).collect())
        }
        _ => None,
    }
}

fn git(args: &[String], e: &mut Effects) {
    // Global options before the subcommand.
    let mut i = 0;
    let mut dir: Option<String> = None;
    while i < args.len() && args[i].starts_with('-') {
        match args[i].as_str() {
            "-C" => {
                dir = args.get(i + 1).cloned();
                i += 2;
            }
            "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--exec-path" | "--config-env" => i += 2,
            _ => i += 1,
        }
    }
    let Some(sub) = args.get(i).map(String::as_str) else { return };
    let rest = &args[(i + 1).min(args.len())..];
    let under = |p: &str| within(dir.as_deref(), p);
    let p = getopt(rest, &Spec { short: "mFCbBsSoOuUxXpt", long: &["--message", "--file", "--author", "--date", "--branch", "--depth", "--origin", "--template", "--reference", "--separate-git-dir", "--config", "--upload-pack", "--receive-pack", "--exec", "--push-option", "--shallow-since", "--shallow-exclude", "--filter", "--jobs", "--pathspec-from-file", "--format", "--pretty", "--since", "--until", "--grep", "--output", "--source", "--worktree", "--fixup", "--squash", "--reuse-message", "--reedit-message", "--trailer", "--cleanup", "--gpg-sign", "--strategy", "--strategy-option", "--onto", "--exclude", "--directory", "--max-count", "--skip", "--unified", "--diff-filter", "--word-diff", "--abbrev", "--chmod", "--conflict", "--track"] });
    let remote = |name: &str| -> String {
        if name.contains("://") {
            url_host(name).unwrap_or_else(|| "?".into())
        } else if let Some(h) = remote_host(name) {
            h
        } else if name.starts_with('/') || name.starts_with('.') || name.starts_with('~') {
            String::new()
        } else {
            format!("remote:{name}")
        }
    };
    match sub {
        "clone" => {
            if let Some(url) = p.operands.first() {
                let h = remote(url);
                if h.is_empty() {
                    e.trees.push(tree(url, true));
                } else {
                    e.hosts.push(h);
                }
                let target = p.operands.get(1).cloned().unwrap_or_else(|| url.trim_end_matches('/').trim_end_matches(".git").rsplit(['/', ':']).next().unwrap_or("repo").to_string());
                e.writes.push(under(&target));
            }
        }
        "push" | "fetch" | "pull" | "ls-remote" => {
            let h = remote(p.operands.first().map_or("origin", String::as_str));
            if !h.is_empty() {
                e.hosts.push(h);
            }
        }
        "submodule" if p.operands.first().is_some_and(|s| matches!(s.as_str(), "update" | "add" | "sync")) => e.hosts.push("?".into()),
        "add" | "stage" => {
            let paths: Vec<String> = files(&p.operands);
            if paths.is_empty() && p.has(&["-A", "--all", "-u", "--update"]) {
                e.trees.push(tree(&under("."), true));
            }
            for f in paths {
                if f == "." || f.ends_with('/') {
                    e.trees.push(tree(&under(&f), true));
                } else {
                    e.reads.push(under(&f));
                }
            }
            e.reads.extend(p.values(&["--pathspec-from-file"]).map(str::to_string));
        }
        "rm" => {
            if !p.has(&["--cached"]) {
                e.deletes.extend(p.operands.iter().map(|f| under(f)));
            }
        }
        "mv" => {
            if let Some((dest, sources)) = p.operands.split_last() {
                e.deletes.extend(sources.iter().map(|f| under(f)));
                e.writes.push(under(dest));
            }
        }
        "checkout" | "restore" => {
            // Paths after `--` (or any, for restore) are overwritten from the index.
            let dashdash = rest.iter().position(|a| a == "--");
            let paths: Vec<String> = match (sub, dashdash) {
                (_, Some(k)) => rest[k + 1..].to_vec(),
                ("restore", None) => p.operands.clone(),
                _ => Vec::new(),
            };
            e.writes.extend(paths.iter().map(|f| under(f)));
        }
        "commit" => {
            e.reads.extend(p.values(&["-F", "--file"]).filter(|f| *f != "-").map(str::to_string));
        }
        "apply" | "am" => e.reads.extend(files(&p.operands).iter().map(|f| under(f))),
        "config" => {
            if p.has(&["--global"]) && p.operands.len() >= 2 {
                e.writes.push("~/.gitconfig".into());
            }
        }
        "remote" => {
            if matches!(p.operands.first().map(String::as_str), Some("update" | "prune" | "show")) && p.operands.first().map(String::as_str) != Some("show") {
                e.hosts.push("?".into());
            }
        }
        _ => {}
    }
}

fn js_packages(prog: &str, args: &[String], e: &mut Effects) {
    let p = getopt(args, &Spec { short: "wCp", long: &["--registry", "--prefix", "--workspace", "--cwd", "--package", "--cache", "--userconfig", "--filter", "--dir"] });
    let sub = p.operands.first().map(String::as_str);
    let registry = p.value(&["--registry"]).and_then(url_host);
    let npm_registry = || -> String { registry.clone().unwrap_or_else(|| if prog == "yarn" { "registry.yarnpkg.com".into() } else { "registry.npmjs.org".into() }) };
    let network = match prog {
        "npx" | "pnpx" | "bunx" => true,
        "yarn" if sub.is_none() => true,
        _ => matches!(sub, Some("install" | "i" | "add" | "ci" | "update" | "up" | "upgrade" | "publish" | "view" | "info" | "show" | "outdated" | "audit" | "dlx" | "exec" | "x" | "create" | "init" | "login" | "adduser" | "search" | "unpublish" | "deprecate" | "dist-tag" | "owner" | "whoami")),
    };
    // `npm init` alone writes package.json; `npm init <initializer>` fetches it.
    if network && !(sub == Some("init") && p.operands.len() < 2) {
        e.hosts.push(npm_registry());
    }
}

fn python_packages(prog: &str, args: &[String], e: &mut Effects) {
    let p = getopt(args, &Spec { short: "ircetp", long: &["--index-url", "--extra-index-url", "--requirement", "--constraint", "--editable", "--target", "--prefix", "--root", "--find-links", "--trusted-host", "--proxy", "--cache-dir", "--src", "--python", "--directory", "--project", "--with", "--group", "--extra", "--default-index", "--index", "--python-version", "--only-binary", "--no-binary", "--platform", "--report", "--log", "--upgrade-strategy"] });
    let ops: Vec<&str> = p.operands.iter().map(String::as_str).collect();
    let network = match (prog, ops.as_slice()) {
        ("uv", ["pip", "install" | "sync" | "compile" | "download", ..] | ["add" | "sync" | "lock" | "run" | "tool" | "python", ..]) => true,
        ("uv", ["pip", ..]) => false,
        ("pipx", ["install" | "run" | "upgrade" | "upgrade-all" | "inject", ..]) => true,
        ("poetry" | "pdm", ["install" | "add" | "update" | "lock" | "publish" | "sync", ..]) => true,
        ("conda" | "mamba", ["install" | "create" | "update" | "upgrade" | "search", ..]) => true,
        (_, ["install" | "download" | "wheel" | "search" | "index", ..]) => true,
        _ => false,
    };
    for r in p.values(&["-r", "--requirement", "-c", "--constraint"]) {
        e.reads.push(r.to_string());
    }
    if network {
        let index: Vec<String> = p.values(&["-i", "--index-url", "--extra-index-url", "--default-index", "--index"]).filter_map(url_host).collect();
        if index.is_empty() || p.has(&["--extra-index-url"]) {
            e.hosts.push(if matches!(prog, "conda" | "mamba") { "conda.anaconda.org".into() } else { "pypi.org".into() });
        }
        e.hosts.extend(index);
        e.writes.extend(p.values(&["-t", "--target", "--prefix", "--root"]).map(str::to_string));
    }
}

/// The host of a URL (`scheme://[user@]host[:port]/…`).
pub fn url_host(s: &str) -> Option<String> {
    let rest = s.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = hostport.strip_prefix('[') { v6.split(']').next()? } else { hostport.split(':').next()? };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The host of a location with no scheme: `host`, `host:port`, `host/path`, `user@host`.
pub fn host_part(s: &str) -> String {
    if let Some(h) = url_host(s) {
        return h;
    }
    let s = s.rsplit_once('@').map_or(s, |(_, h)| h);
    let host = if let Some(v6) = s.strip_prefix('[') { v6.split(']').next().unwrap_or(v6) } else { s.split(['/', ':', '?']).next().unwrap_or(s) };
    if host.is_empty() { "?".into() } else { host.to_ascii_lowercase() }
}

/// `user@host` (or `ssh://user@host:port`) → `host`.
fn user_host(s: &str) -> String {
    host_part(s)
}

/// `-J user@jump:22,other` → the first jump host.
fn jump_host(s: &str) -> String {
    host_part(s.split(',').next().unwrap_or(s))
}

/// The host of an scp/rsync remote location (`[user@]host:path`, `rsync://host/…`, `host::module`).
pub fn remote_host(s: &str) -> Option<String> {
    if let Some(h) = url_host(s) {
        return Some(h);
    }
    if s.starts_with('/') || s.starts_with('.') || s.starts_with('~') {
        return None;
    }
    let (hostpart, _) = s.split_once(':')?;
    let host = hostpart.rsplit_once('@').map_or(hostpart, |(_, h)| h);
    (!host.is_empty() && !host.contains('/')).then(|| host.to_ascii_lowercase())
}

/// The file name a download of a URL is saved under (its last path segment).
fn url_file_name(u: &str) -> Option<String> {
    let rest = u.split_once("://").map_or(u, |(_, r)| r);
    let path = rest.split(['?', '#']).next()?;
    let (_, p) = path.split_once('/')?;
    let name = p.rsplit('/').next()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// The destination of `ssh`: the first operand after the options.
fn ssh_destination(args: &[String], with_value: &str) -> Option<String> {
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            return args.get(i + 1).cloned();
        }
        if a.starts_with('-') && a.len() > 1 {
            // The last letter of a bundle may take the next word.
            let last = a.chars().last().unwrap_or('-');
            let value_attached = a[1..].chars().position(|c| with_value.contains(c)).is_some_and(|k| k + 2 < a.len());
            i += if with_value.contains(last) && !value_attached && a[1..].chars().filter(|c| with_value.contains(*c)).count() == 1 && a[1..].ends_with(last) { 2 } else { 1 };
            continue;
        }
        return Some(a.clone());
    }
    None
}
