//! `andes dashboard` as `andes pool up` serves it: over HTTP (the login token, the
//! pages, escaping, a bad constraint) and in a real headless browser (Debian's
//! chromium driven by chromedriver over WebDriver's JSON protocol): slots and jobs
//! appear, a job submitted meanwhile appears and completes without a reload, and a
//! browser without the token is refused.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use common::pool::{sample, wait_or};
use serde_json::{Value, json};

/// A personal pool (`andes pool up`) in a temporary directory, stopped when dropped.
struct Up {
    child: Child,
    dir: tempfile::TempDir,
    config: String,
    /// The dashboard's URL, with its token.
    url: String,
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Up {
    fn start() -> Up {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // Quick cycles, so that a job runs soon after it is submitted.
        std::fs::write(
            d.join("andes.config.local"),
            "NEGOTIATOR_INTERVAL = 2\nSCHEDD_INTERVAL = 2\nUPDATE_INTERVAL = 2\n",
        )
        .unwrap();
        let mut child = common::andes()
            .args(["pool", "up", "--slots", "1", "--dir"])
            .arg(d)
            .env("ANDES_CONFIG_DIR", d)
            .env_remove("ANDES_CONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(d.join("pool.log")).unwrap())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (mut config, mut url) = (None, None);
        let mut line = String::new();
        while out.read_line(&mut line).unwrap_or(0) > 0 {
            let l = line.trim().to_string();
            line.clear();
            if let Some(c) = l.strip_prefix("export ANDES_CONFIG=") {
                config = Some(c.to_string());
            }
            if let Some(u) = l.strip_prefix("dashboard: ") {
                // Not a terminal: the address only; the login URL is in the
                // pool's dashboard.url, readable by its owner alone.
                assert!(!u.contains("?token="), "the token printed to a pipe: {u}");
                url = Some(u.to_string());
            }
            if l == "pool ready" {
                break;
            }
        }
        // Whatever the pool prints later is read and dropped.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        let log = || std::fs::read_to_string(d.join("pool.log")).unwrap_or_default();
        let (Some(config), Some(_)) = (config, url) else {
            let _ = child.kill();
            panic!("no pool or no dashboard: {}", log());
        };
        let url = std::fs::read_to_string(d.join("dashboard.url")).unwrap().trim().to_string();
        Up { child, dir, config, url }
    }

    /// A process killed when the guard drops.
    fn kill_on_drop(child: Child) -> impl Drop {
        struct Kill(Child);
        impl Drop for Kill {
            fn drop(&mut self) {
                let _ = self.0.kill();
                let _ = self.0.wait();
            }
        }
        Kill(child)
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path().join("pool.log")).unwrap_or_default()
    }

    /// `http://127.0.0.1:PORT`.
    fn base(&self) -> String {
        self.url.split("/?token=").next().unwrap().to_string()
    }

    fn token(&self) -> String {
        self.url.split("/?token=").nth(1).unwrap().to_string()
    }

    /// Submits `text` as a submit file (beside the hello and sleeper samples); the
    /// cluster.
    fn submit(&self, name: &str, text: &str) -> i64 {
        let jobs = self.path().join("jobs");
        std::fs::create_dir_all(&jobs).unwrap();
        for s in ["hello", "sleeper"] {
            std::fs::copy(sample(s), jobs.join(format!("{s}.wasm"))).unwrap();
        }
        std::fs::write(jobs.join(format!("{name}.sub")), text).unwrap();
        let o = common::andes()
            .args(["submit", &format!("{name}.sub")])
            .current_dir(&jobs)
            .env("ANDES_CONFIG_DIR", self.path())
            .env("ANDES_CONFIG", &self.config)
            .output()
            .unwrap();
        let out = common::succeeded(o.clone(), "andes submit");
        common::submitted_cluster(&o, 1).unwrap_or_else(|| panic!("andes submit said: {out}"))
    }
}

/// An HTTP answer: status, headers (names in lower case), body.
struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 exchange on a connection of its own (`Connection: close`).
fn http(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> Answer {
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let mut s = TcpStream::connect(authority).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    let body = body.unwrap_or("");
    if !body.is_empty() || method == "POST" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).unwrap();
    // Read the head, then the body as its length says (some servers keep the
    // connection open whatever the request asked).
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    let split = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "{url}: the connection closed before the answer's head");
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut payload = raw[split + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status: u16 = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse::<usize>().ok());
    let chunked = headers.iter().any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    loop {
        let done = match length {
            Some(n) => payload.len() >= n,
            None if chunked => payload.windows(5).any(|w| w == b"0\r\n\r\n"),
            None => false,
        };
        if done || method == "HEAD" || status == 204 || status == 304 {
            break;
        }
        let n = s.read(&mut buf).unwrap();
        if n == 0 {
            break;
        }
        payload.extend_from_slice(&buf[..n]);
    }
    if chunked {
        payload = dechunk(&payload);
    }
    Answer { status, headers, body: String::from_utf8_lossy(&payload).into_owned() }
}

fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(i) = b.windows(2).position(|w| w == b"\r\n") {
        let size = String::from_utf8_lossy(&b[..i]);
        let n = usize::from_str_radix(size.split(';').next().unwrap().trim(), 16).unwrap_or(0);
        if n == 0 {
            break;
        }
        out.extend_from_slice(&b[i + 2..i + 2 + n]);
        b = &b[i + 2 + n + 2..];
    }
    out
}

fn get(url: &str, headers: &[(&str, &str)]) -> Answer {
    http("GET", url, headers, None)
}

#[test]
fn the_dashboard_wants_its_token_escapes_job_ads_and_shows_a_bad_constraint() {
    let up = Up::start();
    let (base, token) = (up.base(), up.token());
    assert!(base.starts_with("http://127.0.0.1:"), "{base}");
    assert_eq!(token.len(), 64, "{token}");
    // Scripts find the URL in the pool's directory, readable by its owner alone.
    let file = up.path().canonicalize().unwrap().join("dashboard.url");
    assert_eq!(std::fs::read_to_string(&file).unwrap().trim(), up.url);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }

    // No token, a wrong one (as a parameter, a session, a cookie or a
    // bearer): 401. A cookie holding the token itself logs nobody in.
    let wrong = "0".repeat(64);
    let port = base.rsplit(':').next().unwrap().to_string();
    let cookie_name = format!("andes_dashboard_{port}");
    for (path, headers) in [
        ("/", vec![]),
        ("/jobs", vec![]),
        ("/assets/dashboard.js", vec![]),
        ("/api/series", vec![]),
        (&format!("/?token={wrong}")[..], vec![]),
        (&format!("/s/{wrong}/")[..], vec![]),
        (&format!("/s/{token}/")[..], vec![]),
        ("/", vec![("Cookie", format!("{cookie_name}={token}"))]),
        ("/live/overview", vec![("Authorization", format!("Bearer {wrong}"))]),
    ] {
        let h: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
        let a = get(&format!("{base}{path}"), &h);
        assert_eq!(a.status, 401, "{path} {headers:?}: {}", a.body);
        assert!(a.body.contains("the URL it printed"), "{}", a.body);
        assert!(a.header("content-security-policy").is_some());
    }

    // The token opens a session: the same page under the session's prefix,
    // and no cookie (a browser sends 127.0.0.1's cookies to every port).
    let a = get(&format!("{base}/jobs?constraint=JobStatus%3D%3D1&token={token}"), &[]);
    assert_eq!(a.status, 303, "{}", a.body);
    assert!(a.header("set-cookie").is_none());
    let loc = a.header("location").unwrap().to_string();
    let session = loc.strip_prefix("/s/").and_then(|l| l.split_once('/')).unwrap().0.to_string();
    assert_eq!(session.len(), 64);
    assert_ne!(session, token);
    assert_eq!(loc, format!("/s/{session}/jobs?constraint=JobStatus%3D%3D1"));
    let a = get(&format!("{base}{loc}"), &[]);
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains(&format!("<base href=\"/s/{session}/\">")), "{}", a.body);
    // Everything below is asked for under the session, with no other credential.
    let base = format!("{base}/s/{session}");
    let with: [(&str, &str); 0] = [];

    let a = get(&format!("{base}/"), &with);
    assert_eq!(a.status, 200, "{}", a.body);
    let csp = a.header("content-security-policy").unwrap();
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"), "{csp}");
    assert!(a.body.contains("<h2>Slots</h2>") && a.body.contains("id=\"throughput\""));
    assert!(!a.body.contains("<script>"), "no inline script");
    // The slot reaches the collector, and the overview shows it.
    wait_or(
        "the slot on the overview",
        Duration::from_secs(60),
        || get(&format!("{base}/live/overview"), &with).body.contains("<td>Unclaimed</td>"),
        || up.log(),
    );
    let bearer = format!("Bearer {token}");
    let a = get(&format!("{}/live/overview", up.base()), &[("Authorization", &bearer)]);
    assert_eq!(a.status, 200);
    assert!(a.body.contains("id=\"users\""), "{}", a.body);
    for asset in ["uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE", "dashboard.js"] {
        let a = get(&format!("{base}/assets/{asset}"), &with);
        assert_eq!(a.status, 200, "{asset}");
        assert!(a.body.len() > 100, "{asset}");
    }
    let a = get(&format!("{base}/api/series"), &with);
    assert_eq!(a.status, 200);
    let v: Value = serde_json::from_str(&a.body).unwrap();
    assert!(v["t"].is_array() && v["completed"].is_array() && v["depth"].is_array(), "{v}");

    // A job whose ad carries markup: shown as text, never as markup.
    let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>";
    let cluster = up.submit(
        "evil",
        &format!(
            "executable = hello.wasm\nhold = true\n+Evil = \"{evil}\"\n\
             +JobBatchName = \"<b>batch</b>\"\nlog = evil.log\nqueue\n"
        ),
    );
    let a = get(&format!("{base}/job/{cluster}.0"), &with);
    assert_eq!(a.status, 200, "{}", a.body);
    assert!(a.body.contains("&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x"), "{}", a.body);
    assert!(!a.body.contains("<script>alert") && !a.body.contains("<img src=x"), "{}", a.body);
    assert!(!a.body.contains("<b>batch</b>"), "{}", a.body);
    assert!(a.body.contains("id=\"job-status\" class=\"status\">Held<"), "{}", a.body);
    // Its event log, read from its UserLog, as a timeline.
    assert!(a.body.contains("id=\"timeline\"") && a.body.contains("ULOG_SUBMIT"), "{}", a.body);
    // The job table, filtered by the schedd on the constraint given.
    let q = |c: &str| {
        let c: String = c
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02X}")
                }
            })
            .collect();
        get(&format!("{base}/live/jobs?constraint={c}"), &with).body
    };
    let row = format!("id=\"job-{cluster}-0\"");
    assert!(q("Evil =!= undefined").contains(&row), "{}", q("Evil =!= undefined"));
    assert!(!q("Evil =?= undefined").contains(&row));
    let a = get(&format!("{base}/jobs?constraint=JobStatus%20%3D%3D%205"), &with);
    assert!(a.body.contains(&row) && a.body.contains("value=\"JobStatus == 5\""), "{}", a.body);
    // A bad expression: the schedd's error on the page, and the page still served.
    let bad = get(&format!("{base}/jobs?constraint=JobStatus%20%3D%3D%20%28"), &with);
    assert_eq!(bad.status, 200);
    assert!(bad.body.contains("id=\"constraint-error\""), "{}", bad.body);
    assert!(bad.body.contains("The schedd refused the query: 400"), "{}", bad.body);
    let long = "x".repeat(5000);
    assert!(q(&long).contains("longer than 4096 bytes"));
    assert_eq!(get(&format!("{base}/job/nonsense"), &with).status, 404);
    assert_eq!(get(&format!("{base}/assets/../trust"), &with).status, 404);
    let a = get(&format!("{base}/job/9999.0"), &with);
    assert!(a.body.contains("No job 9999.0"), "{}", a.body);

    // A running job's page shows what it has written so far, from its host.
    let sleeper = up.submit("sleeper", "executable = sleeper.wasm\noutput = s.out\nqueue\n");
    wait_or(
        "the running job's output on its page",
        Duration::from_secs(60),
        || {
            let b = get(&format!("{base}/live/job/{sleeper}.0"), &with).body;
            b.contains("from its host") && b.contains("<pre id=\"output\">sleeping\n</pre>")
        },
        || up.log(),
    );
    let o = common::andes()
        .args(["rm", &sleeper.to_string()])
        .env("ANDES_CONFIG_DIR", up.path())
        .env("ANDES_CONFIG", &up.config)
        .output()
        .unwrap();
    common::succeeded(o, "andes rm");

    // `andes dashboard` on its own, as any user of the pool runs it: a token of its
    // own, and the same jobs.
    let mut child = common::andes()
        .args(["dashboard", "--listen", "127.0.0.1:0", "--url-file"])
        .arg(up.path().join("own-dashboard.url"))
        .env("ANDES_CONFIG_DIR", up.path())
        .env("ANDES_CONFIG", &up.config)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(up.path().join("dashboard.log")).unwrap())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let own = Up::kill_on_drop(child);
    let url = line.trim().strip_prefix("dashboard: http://127.0.0.1:").unwrap_or_else(|| {
        panic!("{line}{}", std::fs::read_to_string(up.path().join("dashboard.log")).unwrap())
    });
    // Not a terminal: the address, and where the login URL is kept.
    let (port, rest) = url.split_once('/').unwrap();
    assert!(!rest.contains("?token="), "{line}");
    let file = rest.split("is in ").nth(1).unwrap().split(',').next().unwrap().trim();
    let url = std::fs::read_to_string(file).unwrap();
    let token2 = url.trim().split("/?token=").nth(1).unwrap().to_string();
    assert_ne!(token2, token);
    let base2 = format!("http://127.0.0.1:{port}");
    let a = get(&format!("{base2}/s/{session}/"), &[]);
    assert_eq!(a.status, 401, "the pool's dashboard's session is not this one's");
    let a = get(&format!("{base2}/?token={token}"), &[]);
    assert_eq!(a.status, 401, "the pool's token is not its");
    let bearer2 = format!("Bearer {token2}");
    let a = get(&format!("{base2}/job/{cluster}.0"), &[("Authorization", &bearer2)]);
    assert!(a.body.contains("id=\"job-status\" class=\"status\">Held<"), "{}", a.body);
    drop(own);
}

// ---------------------------------------------------------------------------
// The browser

/// Where chromium and chromedriver are (CHROMIUM, CHROMEDRIVER, else Debian's).
fn browser() -> Option<(PathBuf, PathBuf)> {
    let find = |var: &str, default: &str| {
        let p = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| default.into());
        p.exists().then_some(p)
    };
    Some((find("CHROMIUM", "/usr/bin/chromium")?, find("CHROMEDRIVER", "/usr/bin/chromedriver")?))
}

/// chromedriver on a port of its own, killed when dropped.
struct Driver {
    child: Child,
    base: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Driver {
    fn start(exe: &Path, log: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = std::process::Command::new(exe)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let d = Driver { child, base: format!("http://127.0.0.1:{port}") };
        let ready = || {
            TcpStream::connect(("127.0.0.1", port)).is_ok()
                && serde_json::from_str::<Value>(&get(&format!("{}/status", d.base), &[]).body)
                    .is_ok_and(|v| v["value"]["ready"] == json!(true))
        };
        wait_or("chromedriver", Duration::from_secs(30), ready, || {
            std::fs::read_to_string(log).unwrap_or_default()
        });
        d
    }

    /// A new headless browser.
    fn session(&self, chromium: &Path, profile: &Path) -> Session<'_> {
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                         "--disable-dev-shm-usage", "--no-first-run",
                         format!("--user-data-dir={}", profile.display())]
            }
        }}});
        let a = http("POST", &format!("{}/session", self.base), &[], Some(&caps.to_string()));
        let v: Value = serde_json::from_str(&a.body).unwrap_or(Value::Null);
        let id =
            v["value"]["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {}", a.body));
        Session { driver: self, id: id.to_string() }
    }
}

/// One browser, closed when dropped.
struct Session<'a> {
    driver: &'a Driver,
    id: String,
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        let _ = http("DELETE", &format!("{}/session/{}", self.driver.base, self.id), &[], None);
    }
}

impl Session<'_> {
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}/session/{}{path}", self.driver.base, self.id);
        let a = http(method, &url, &[], body.map(|b| b.to_string()).as_deref());
        let v: Value = serde_json::from_str(&a.body).unwrap_or(Value::Null);
        assert_eq!(a.status, 200, "WebDriver {method} {path}: {}", a.body);
        v["value"].clone()
    }

    fn go(&self, url: &str) {
        self.call("POST", "/url", Some(json!({ "url": url })));
    }

    fn url(&self) -> String {
        self.call("GET", "/url", None).as_str().unwrap_or_default().to_string()
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the page.
    fn js(&self, script: &str, args: Value) -> Value {
        self.call("POST", "/execute/sync", Some(json!({ "script": script, "args": args })))
    }

    /// The text of the first element `selector` finds, if any.
    fn text(&self, selector: &str) -> Option<String> {
        let v = self.js(
            "var e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            json!([selector]),
        );
        v.as_str().map(str::to_string)
    }
}

#[test]
fn a_browser_sees_the_pool_live_and_is_refused_without_the_token() {
    let Some((chromium, chromedriver)) = browser() else {
        common::not_run(
            "the dashboard's browser test",
            "chromium and chromedriver (apt-get install chromium chromium-driver; or set \
             CHROMIUM and CHROMEDRIVER)",
        );
        return;
    };
    let up = Up::start();
    let base = up.base();
    let profiles = tempfile::tempdir().unwrap();
    let driver = Driver::start(&chromedriver, &up.path().join("chromedriver.log"));
    let context = || {
        format!(
            "{}\n--- chromedriver ---\n{}",
            up.log(),
            std::fs::read_to_string(up.path().join("chromedriver.log")).unwrap_or_default()
        )
    };
    let deadline = Duration::from_secs(90);
    {
        // A job waiting in the queue before the browser opens.
        let held = up.submit("held", "executable = hello.wasm\nhold = true\nqueue\n");
        let b = driver.session(&chromium, &profiles.path().join("a"));
        // The printed URL logs in, and the address bar keeps no token: the
        // session's prefix, whose secret lives only in this dashboard's paths.
        b.go(&up.url);
        let here = b.url();
        assert!(here.starts_with(&format!("{base}/s/")) && !here.contains(&up.token()), "{here}");
        let base = here.trim_end_matches('/').to_string();
        assert_eq!(b.js("return document.title;", json!([])), json!("andes · pool"));
        // Slots and jobs appear; the plots are drawn (uPlot under the CSP).
        wait_or(
            "the slot in the browser",
            deadline,
            || b.text("#slot-states").is_some_and(|t| t.contains("Unclaimed")),
            context,
        );
        // Jobs by user: the held one.
        assert_eq!(b.text("#users tbody tr td:nth-child(4)").as_deref(), Some("1"));
        assert!(b.text("#totals").is_some_and(|t| t.contains("1 jobs; 0 idle, 0 running, 1 held")));
        wait_or(
            "the plots",
            deadline,
            || {
                b.js(
                    "return document.querySelectorAll('#throughput canvas, #depth canvas').length;",
                    json!([]),
                ) == json!(2)
            },
            context,
        );

        // The job table, left open while a job is submitted, runs and completes.
        b.go(&format!("{base}/jobs"));
        assert!(b.text("#jobs").is_some(), "the job table");
        b.js("window.andesMarker = 42; return null;", json!([]));
        let cluster = up.submit(
            "live",
            "executable = hello.wasm\narguments = from the browser test\n\
             output = live.out\nlog = live.log\nqueue\n",
        );
        assert!(b.text(&format!("#job-{held}-0 .status")).is_some_and(|t| t == "Held"));
        let row = format!("#job-{cluster}-0");
        wait_or("the new job in the table", deadline, || b.text(&row).is_some(), context);
        wait_or(
            "the job completed in the table",
            deadline,
            || b.text(&format!("{row} .status")).as_deref() == Some("Completed"),
            || format!("row: {:?}\n{}", b.text(&row), context()),
        );
        assert_eq!(
            b.js("return window.andesMarker;", json!([])),
            json!(42),
            "the page was never reloaded"
        );
        // The throughput plot counts it within a round of the dashboard's sampling.
        let bearer = format!("Bearer {}", up.token());
        wait_or(
            "the completion on the throughput plot",
            deadline,
            || {
                let a = get(&format!("{}/api/series", up.base()), &[("Authorization", &bearer)]);
                let v: Value = serde_json::from_str(&a.body).unwrap_or(Value::Null);
                v["completed"].as_array().is_some_and(|c| c.iter().any(|n| n.as_u64() >= Some(1)))
            },
            context,
        );
        // Its page: the timeline ends with its termination, its output is there.
        b.go(&format!("{base}/job/{cluster}.0"));
        wait_or(
            "the job's page",
            deadline,
            || b.text("#timeline").is_some_and(|t| t.contains("ULOG_JOB_TERMINATED")),
            context,
        );
        assert_eq!(b.text("#job-status").as_deref(), Some("Completed"));

        // Found from outside: with the token in a cookie, the browser sent it
        // to a listener any local user had on another port of 127.0.0.1,
        // which then read the dashboard's pages with it. The browser now
        // holds no cookie, and what such a listener receives logs nothing in.
        let cookies = b.call("GET", "/cookie", None);
        assert_eq!(cookies, json!([]), "the browser keeps a cookie");
        let trap = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let trap_url = format!("http://{}/steal", trap.local_addr().unwrap());
        let caught = std::thread::spawn(move || {
            use std::io::{Read, Write};
            let (mut c, _) = trap.accept().unwrap();
            let mut head = Vec::new();
            let mut buf = [0u8; 4096];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = c.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break;
                }
                head.extend_from_slice(&buf[..n]);
            }
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            String::from_utf8_lossy(&head).into_owned()
        });
        b.go(&trap_url);
        let head = caught.join().unwrap();
        let lower = head.to_ascii_lowercase();
        assert!(!lower.contains("cookie:"), "{head}");
        let session = base.rsplit('/').next().unwrap();
        assert!(!head.contains(session) && !head.contains(&up.token()), "{head}");
    }

    // A fresh browser without the token is refused, whatever page it asks for.
    let c = driver.session(&chromium, &profiles.path().join("b"));
    for path in ["/", "/jobs", "/live/overview"] {
        c.go(&format!("{base}{path}"));
        let body = c.text("body").unwrap_or_default();
        assert!(body.contains("Login needed"), "{path}: {body}");
        assert!(c.text("#slot-states").is_none());
    }
}

/// A DAGMan job's page draws its DAG: every node, coloured by its latest
/// job's state, each a link to that job's page; node names are text, never
/// markup.
#[test]
fn a_dag_job_s_page_draws_its_dag_with_links_to_its_nodes() {
    let up = Up::start();
    let jobs = up.path().join("jobs");
    std::fs::create_dir_all(&jobs).unwrap();
    std::fs::copy(sample("exit_code"), jobs.join("exit_code.wasm")).unwrap();
    std::fs::write(jobs.join("ok.sub"), "executable = exit_code.wasm\narguments = 0\nqueue\n")
        .unwrap();
    std::fs::write(jobs.join("bad.sub"), "executable = exit_code.wasm\narguments = 3\nqueue\n")
        .unwrap();
    std::fs::write(
        jobs.join("g.dag"),
        "JOB A ok.sub\nJOB B bad.sub\nJOB C ok.sub\nPARENT A CHILD B\nPARENT B CHILD C\n",
    )
    .unwrap();
    let o = common::andes()
        .args(["submit-dag", "g.dag"])
        .current_dir(&jobs)
        .env("ANDES_CONFIG_DIR", up.path())
        .env("ANDES_CONFIG", &up.config)
        .output()
        .unwrap();
    let out = common::succeeded(o, "andes submit-dag");
    let cluster: i64 = out
        .lines()
        .find_map(|l| l.strip_prefix("1 job(s) submitted to cluster "))
        .and_then(|n| n.trim_end_matches('.').parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    let with = [("Authorization", format!("Bearer {}", up.token()))];
    let with: Vec<(&str, &str)> = with.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let url = format!("{}/live/job/{cluster}.0", up.base());
    wait_or(
        "the DAG drawn with A done and B failed",
        Duration::from_secs(90),
        || {
            let b = get(&url, &with).body;
            b.contains("data-state=\"failed\"") && b.contains("<svg id=\"dag-graph\"")
        },
        || format!("{}\n{}", get(&url, &with).body, up.log()),
    );
    let page = get(&url, &with).body;
    assert!(page.contains("3 nodes: "), "{page}");
    assert!(page.contains("<title>A: done</title>"), "{page}");
    assert!(page.contains("<title>B: failed</title>"), "{page}");
    assert!(page.contains("<title>C: waiting</title>"), "{page}");
    assert_eq!(page.matches("class=\"dag-node\"").count(), 3, "{page}");
    assert_eq!(page.matches("<line ").count(), 2, "{page}");
    // A's node links to A's job page, which answers.
    let at = page.find("<title>A: done</title>").unwrap();
    let link = page[..at].rsplit("<a href=\"").next().unwrap();
    let job = link.split('"').next().unwrap();
    assert!(job.starts_with("job/"), "{page}");
    assert_eq!(get(&format!("{}/{job}", up.base()), &with).status, 200);
}
