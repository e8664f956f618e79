//! `andes dashboard`: a live web page of the pool, for its user.
//!
//! It acts as the user: it asks the schedd and the collector with the user's own
//! key through the signed client every command uses ([`super::client::user_client`]),
//! so the page shows the jobs `andes q` shows that user and no more. It serves plain
//! HTTP on 127.0.0.1 through the pool's own server wrapper ([`andes_protocol::Server`]:
//! connection cap, header and idle deadlines); a browser cannot sign requests, so a
//! login token made at start (32 random bytes, hex) takes the signature's place, as
//! notebook servers do: `/?token=...` sets an HttpOnly, SameSite=Strict cookie and
//! redirects to the page without it; every other request needs the cookie (or
//! `Authorization: Bearer TOKEN`), else 401.
//!
//! Pages: `/` (slots by state and activity, jobs by status per user, throughput and
//! queue depth over the last hour), `/jobs?constraint=EXPR` (the queue and recent
//! history, filtered by the schedd as `andes q -constraint` is), `/job/C.P` (its ad,
//! its event log as a timeline, the tail of its output, its checkpoints, its route).
//! Each page's live part is an HTML fragment under `/live/...` the page's script
//! fetches every two seconds; the plots' data is `/api/series`.

mod dag;
mod html;
mod series;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use andes_central::collector::AdType;
use andes_protocol::pool::{CollectorQuery, CollectorQueryReply, TailReply};
use andes_protocol::{Client, ClientError};
use andes_schedd::api::{
    HistoryRequest, QueryReply, QueryRequest, SummaryReply, SummaryRequest, TailJobRequest, Targets,
};
use andes_schedd::job::{JobId, JobSelector, JobStatus};
use andes_schedd::userlog::{self, JobEvent, ParseOptions};
use anyhow::{Context, Result, anyhow};
use axum::Extension;
use axum::Router;
use axum::extract::{Path as UrlPath, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use clap::Args;
use classad::ClassAd;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Write as _;

use crate::settings::Settings;
use html::{esc, int, string};
pub use series::{JobTimes, Sample, Series};

/// The longest constraint taken, bytes.
pub const MAX_CONSTRAINT: usize = 4096;
/// The longest query string taken, bytes.
const MAX_QUERY: usize = 16 * 1024;
/// Queue jobs a job table shows at most.
pub const MAX_ROWS: usize = 500;
/// Jobs from history a job table shows at most.
pub const HISTORY_ROWS: usize = 100;
/// Slots listed at most (all are counted).
const MAX_SLOT_ROWS: usize = 200;
/// Jobs read at most for the plots, from the queue and from history each.
const MAX_SERIES_JOBS: usize = 100_000;
/// Jobs read from history at start for the plots (more if the last hour holds more).
const HISTORY_PRIME: usize = 20_000;
/// Events of a job's log shown at most (the latest).
const MAX_EVENTS: usize = 500;
/// The end of a log or output file read at most, bytes.
const MAX_FILE_TAIL: u64 = 4 << 20;
/// The end of a job's output shown, bytes.
const OUTPUT_TAIL: u64 = 8 * 1024;
/// Requests to the pool's daemons at once, whatever the browsers ask.
const BACKEND_CALLS: usize = 8;
/// Browser connections at once.
const MAX_CONNECTIONS: usize = 64;
/// How often the plots' data is read again (and a queue depth sampled).
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// How long a call to a daemon may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

const UPLOT_JS: &str = include_str!("assets/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("assets/uPlot.min.css");
const UPLOT_LICENSE: &str = include_str!("assets/uPlot.LICENSE");
const DASHBOARD_JS: &str = include_str!("assets/dashboard.js");
const DASHBOARD_CSS: &str = include_str!("assets/dashboard.css");

/// What every response carries: no script but the dashboard's own files, no
/// framing, no caching, and no token leaking in a Referer.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'self'; form-action 'self'; \
                   frame-ancestors 'none'";

/// Sessions kept at once (the oldest is forgotten past it).
const MAX_SESSIONS: usize = 64;

/// Arguments of `andes dashboard`.
#[derive(Args, Debug)]
pub struct DashboardArgs {
    /// Where to listen (default 127.0.0.1, any free port). An address other than
    /// loopback must be named here, and then the token and the pages travel in
    /// clear over the network.
    #[arg(long, value_name = "ADDR:PORT")]
    listen: Option<SocketAddr>,
    /// Where to keep the login URL (with its token), readable by you alone:
    /// by default `~/.andes/dashboard-PORT.url`. The URL is printed only on
    /// a terminal.
    #[arg(long, value_name = "FILE")]
    url_file: Option<std::path::PathBuf>,
}

/// Runs `andes dashboard` until interrupted.
pub fn run(args: DashboardArgs) -> Result<ExitCode> {
    let settings = Settings::load()?;
    let rt = tokio::runtime::Runtime::new()?;
    rt.block_on(async move {
        let d = Dashboard::bind(&settings, args.listen).await?;
        let file = match args.url_file {
            Some(f) => f,
            None => {
                let dir = dirs::home_dir()
                    .ok_or_else(|| anyhow!("no home directory for the dashboard's URL file"))?
                    .join(".andes");
                andes_beneath::private::create_dirs_reachable(&dir)?;
                #[cfg(unix)]
                std::fs::set_permissions(
                    &dir,
                    std::os::unix::fs::PermissionsExt::from_mode(0o700),
                )?;
                let port = d.server.local_addr().port();
                dir.join(format!("dashboard-{port}.url"))
            }
        };
        let stop = super::stop_signal();
        write_url_file(&file, d.url())?;
        outln!("dashboard: {}", shown(d.url(), &file));
        d.serve(stop).await
    })?;
    Ok(ExitCode::SUCCESS)
}

/// A dashboard bound to its address, ready to serve.
pub struct Dashboard {
    server: andes_protocol::Server,
    url: String,
    state: Arc<Dash>,
}

impl Dashboard {
    /// Binds the dashboard of the user `settings` name (their key, their schedd and
    /// collector) to `listen` (default 127.0.0.1, any port) and makes its token.
    /// Refuses nothing but what cannot work; warns on standard error when `listen`
    /// is not a loopback address.
    pub async fn bind(settings: &Settings, listen: Option<SocketAddr>) -> Result<Dashboard> {
        let schedd = super::client::user_client(settings, &settings.schedd_url()?)?
            .with_timeout(CALL_TIMEOUT);
        let collector = super::client::user_client(settings, &settings.collector_url()?)?
            .with_timeout(CALL_TIMEOUT);
        let addr = listen.unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 0)));
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("the dashboard cannot listen on {addr}"))?;
        let bound = listener.local_addr()?;
        let server = if bound.ip().is_loopback() {
            andes_protocol::Server::plain(listener)?
        } else {
            eprintln!(
                "andes dashboard: listening on {bound}, which is not a loopback address: \
                 the login token and every page travel in clear over the network"
            );
            andes_protocol::Server::plain_anywhere(listener)?
        };
        let server = server.with_limits(andes_protocol::Limits {
            max_connections: MAX_CONNECTIONS,
            handshake_timeout: Duration::from_secs(10),
            header_read_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(30),
        });
        let host = if bound.ip().is_loopback() {
            bound.to_string()
        } else {
            settings.advertised(bound)?
        };
        let token = new_token();
        let url = format!("http://{host}/?token={token}");
        let state = Arc::new(Dash {
            schedd,
            collector,
            sessions: Mutex::new(VecDeque::new()),
            token,
            mine: settings.bool("CONDOR_Q_ONLY_MY_JOBS", true)?,
            me: settings.get("KEY_NAME")?,
            gate: tokio::sync::Semaphore::new(BACKEND_CALLS),
            series: Mutex::new(Series::default()),
            samples: Mutex::new(VecDeque::new()),
        });
        Ok(Dashboard { server, url, state })
    }

    /// The URL to open: the dashboard's address with its login token.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until `shutdown` completes.
    pub async fn serve(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let sampler = tokio::spawn(sample(self.state.clone()));
        let r = self.server.serve(router(self.state), shutdown).await;
        sampler.abort();
        r.map_err(|e| anyhow!("the dashboard: {e}"))
    }
}

/// What to print of the dashboard's login `url`, kept in `file`: the whole URL
/// on a terminal; elsewhere (a log file, a pipe) only the address and where
/// the URL is, so that the token never lands in a file others may read.
pub fn shown(url: &str, file: &Path) -> String {
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return url.to_string();
    }
    let address = url.split("?token=").next().unwrap_or(url);
    format!(
        "{address} (its login URL, with its token, is in {}, readable by you alone)",
        file.display()
    )
}

/// Writes the dashboard's URL to `path`, readable by its owner only (it holds the
/// token).
pub fn write_url_file(path: &Path, url: &str) -> Result<()> {
    andes_beneath::replace_file(path, format!("{url}\n").as_bytes(), 0o600)
        .with_context(|| format!("writing {}", path.display()))
}

/// 32 random bytes, hex.
fn new_token() -> String {
    let mut b = [0u8; 32];
    rand_core::RngCore::fill_bytes(&mut rand_core::OsRng, &mut b);
    hex::encode(b)
}

/// Whether `given` is `token`, in time that does not depend on where they differ.
pub fn token_matches(token: &str, given: &str) -> bool {
    use subtle::ConstantTimeEq;
    token.len() == given.len() && bool::from(token.as_bytes().ct_eq(given.as_bytes()))
}

/// What the handlers share.
struct Dash {
    schedd: Client,
    collector: Client,
    token: String,
    /// The sessions opened with the token: each a secret that lives only in
    /// the paths of its pages (`/s/SESSION/...`), never in a cookie, which a
    /// browser would send to every port of the host.
    sessions: Mutex<VecDeque<String>>,
    /// Only the user's own jobs, as `andes q` (CONDOR_Q_ONLY_MY_JOBS).
    mine: bool,
    /// The identity the dashboard signs as (KEY_NAME): files a job names are read
    /// only for a job of this owner.
    me: Option<String>,
    /// Bounds the calls to the daemons at once.
    gate: tokio::sync::Semaphore,
    series: Mutex<Series>,
    samples: Mutex<VecDeque<Sample>>,
}

/// A daemon's refusal or a failure to reach it, as one line.
fn reason(e: &ClientError) -> String {
    e.kind.to_string()
}

impl Dash {
    async fn call<B: Serialize, R: DeserializeOwned>(
        &self,
        client: &Client,
        path: &str,
        body: &B,
    ) -> Result<R, String> {
        let _permit = self.gate.acquire().await.map_err(|e| e.to_string())?;
        client.call(http::Method::POST, path, Some(body)).await.map_err(|e| reason(&e))
    }

    async fn ads<B: Serialize>(&self, path: &str, body: &B) -> Result<Vec<ClassAd>, String> {
        let r: QueryReply = self.call(&self.schedd, path, body).await?;
        r.ads
            .iter()
            .map(|t| classad::parse_ad(t).map_err(|e| format!("the schedd sent a bad ad: {e}")))
            .collect()
    }

    async fn slots(&self) -> Result<Vec<ClassAd>, String> {
        let req = CollectorQuery {
            kind: Some(AdType::Machine.my_type().to_string()),
            constraint: None,
            projection: ["Name", "State", "Activity", "RemoteOwner", "JobId", "Cpus", "Memory"]
                .map(String::from)
                .to_vec(),
        };
        let r: CollectorQueryReply =
            self.call(&self.collector, "/v1/collector/query", &req).await?;
        r.ads
            .iter()
            .map(|t| classad::parse_ad(t).map_err(|e| format!("the collector sent a bad ad: {e}")))
            .collect()
    }

    fn is_mine(&self, ad: &ClassAd) -> bool {
        self.me.as_deref().is_some_and(|me| string(ad, "Owner") == me)
    }
}

/// The pages, behind [`gate`]: every page lives under its session's prefix
/// (`/s/SESSION/`), which [`gate`] checks and strips before the pages'
/// routes see the request.
fn router(state: Arc<Dash>) -> Router {
    let pages = Router::new()
        .route("/", get(overview_page))
        .route("/live/overview", get(overview_live))
        .route("/jobs", get(jobs_page))
        .route("/live/jobs", get(jobs_live))
        .route("/job/{id}", get(job_page))
        .route("/live/job/{id}", get(job_live))
        .route("/api/series", get(series_json))
        .route("/assets/{name}", get(asset))
        .with_state(state.clone());
    Router::new()
        .fallback(move |req: Request| gate(state.clone(), pages.clone(), req))
        .layer(axum::middleware::map_response(secure_headers))
}

async fn secure_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    r
}

/// The query string's parameters, decoded.
fn params(query: &str) -> Vec<(String, String)> {
    let decode = |s: &str| {
        let s = s.replace('+', " ");
        percent_encoding::percent_decode_str(&s).decode_utf8_lossy().into_owned()
    };
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

fn param(uri: &Uri, name: &str) -> Option<String> {
    params(uri.query().unwrap_or("")).into_iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        html::unauthorized(),
    )
        .into_response()
}

/// The login. `?token=TOKEN` (the URL the dashboard prints) opens a session
/// and redirects to its prefix, `/s/SESSION/`: the pages refer to each other
/// relative to it (`<base href>`), so the session travels only in the paths
/// a page of this dashboard asks for. A cookie would not do: a browser sends
/// the cookies of 127.0.0.1 to every port of 127.0.0.1, so any local user's
/// listener the browser is sent to would receive it. A script may instead
/// send the token itself as `Authorization: Bearer TOKEN`.
async fn gate(d: Arc<Dash>, pages: Router, req: Request) -> Response {
    use tower_service::Service;
    let query = req.uri().query().unwrap_or("");
    if query.len() > MAX_QUERY {
        return (StatusCode::URI_TOO_LONG, "the query is too long\n").into_response();
    }
    if let Some(given) = param(req.uri(), "token") {
        if !token_matches(&d.token, &given) {
            return unauthorized();
        }
        let rest: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty() && *p != "token" && !p.starts_with("token="))
            .collect();
        let session = d.open_session();
        // The page asked for, under the session; never another host (`//host`).
        let path = req.uri().path().trim_start_matches('/');
        let mut location = format!("/s/{session}/{path}");
        if !rest.is_empty() {
            location.push('?');
            location.push_str(&rest.join("&"));
        }
        return (StatusCode::SEE_OTHER, [(header::LOCATION, location)], "").into_response();
    }
    let path = req.uri().path().to_string();
    let (inner, base) = match path.strip_prefix("/s/").and_then(|p| p.split_once('/')) {
        Some((session, rest)) if d.has_session(session) => {
            (format!("/{rest}"), format!("/s/{session}/"))
        }
        Some(_) | None if has_bearer(req.headers(), &d.token) => (path.clone(), "/".to_string()),
        _ => return unauthorized(),
    };
    let (mut parts, body) = req.into_parts();
    parts.extensions.insert(Base(base));
    let uri = match req_uri(&inner, parts.uri.query()) {
        Some(u) => u,
        None => return (StatusCode::BAD_REQUEST, "bad path\n").into_response(),
    };
    parts.uri = uri;
    let mut pages = pages;
    match pages.call(Request::from_parts(parts, body)).await {
        Ok(r) => r,
        Err(e) => match e {},
    }
}

/// The prefix the pages of a request's session live under.
#[derive(Clone)]
struct Base(String);

/// `path` with `query`, as a request URI.
fn req_uri(path: &str, query: Option<&str>) -> Option<Uri> {
    let text = match query {
        Some(q) => format!("{path}?{q}"),
        None => path.to_string(),
    };
    text.parse().ok()
}

impl Dash {
    /// A new session (the oldest forgotten past [`MAX_SESSIONS`]).
    fn open_session(&self) -> String {
        let s = new_token();
        let mut all = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if all.len() >= MAX_SESSIONS {
            all.pop_front();
        }
        all.push_back(s.clone());
        s
    }

    fn has_session(&self, given: &str) -> bool {
        let all = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        all.iter().any(|s| token_matches(s, given))
    }
}

fn has_bearer(headers: &HeaderMap, token: &str) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|t| token_matches(token, t.trim()))
}

fn html_response(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], body).into_response()
}

async fn asset(UrlPath(name): UrlPath<String>) -> Response {
    let (kind, body) = match name.as_str() {
        "uPlot.iife.min.js" => ("text/javascript; charset=utf-8", UPLOT_JS),
        "uPlot.min.css" => ("text/css; charset=utf-8", UPLOT_CSS),
        "uPlot.LICENSE" => ("text/plain; charset=utf-8", UPLOT_LICENSE),
        "dashboard.js" => ("text/javascript; charset=utf-8", DASHBOARD_JS),
        "dashboard.css" => ("text/css; charset=utf-8", DASHBOARD_CSS),
        _ => return (StatusCode::NOT_FOUND, "no such file\n").into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

// ---------------------------------------------------------------------------
// The overview

async fn overview_page(State(d): State<Arc<Dash>>, Extension(base): Extension<Base>) -> Response {
    let live = overview(&d).await;
    html_response(html::page(
        &base.0,
        "pool",
        &format!(
            "<h1>Pool</h1><div id=\"overview\" data-live=\"live/overview\">{live}</div>\
             <section><h2>The last hour</h2><div class=\"charts\">\
             <figure><figcaption>Jobs completed per minute</figcaption>\
             <div id=\"throughput\" class=\"chart\"></div></figure>\
             <figure><figcaption>Queue depth (idle, running and held jobs)</figcaption>\
             <div id=\"depth\" class=\"chart\"></div></figure></div></section>\
             <p class=\"note\">Charts drawn with uPlot (<a href=\"assets/uPlot.LICENSE\">MIT \
             licence</a>).</p>"
        ),
    ))
}

async fn overview_live(State(d): State<Arc<Dash>>) -> Response {
    html_response(overview(&d).await)
}

async fn overview(d: &Dash) -> String {
    let summary_req = SummaryRequest { owners: Vec::new(), mine: d.mine };
    let (slots, summary) =
        tokio::join!(d.slots(), d.call::<_, SummaryReply>(&d.schedd, "/v1/summary", &summary_req));
    let mut out = String::from("<section><h2>Slots</h2>");
    match slots {
        Ok(slots) => slots_html(&mut out, &slots),
        Err(e) => out.push_str(&html::error("the collector", &e)),
    }
    out.push_str("</section><section><h2>Jobs by user</h2>");
    match summary {
        Ok(s) => users_html(&mut out, &s),
        Err(e) => out.push_str(&html::error("the schedd", &e)),
    }
    let _ = write!(
        out,
        "</section><p class=\"stamp\">As of {}.</p>",
        esc(&html::when(super::client::now()))
    );
    out
}

fn slots_html(out: &mut String, slots: &[ClassAd]) {
    let mut by: std::collections::BTreeMap<(String, String), usize> = Default::default();
    for s in slots {
        *by.entry((string(s, "State"), string(s, "Activity"))).or_default() += 1;
    }
    let _ = write!(
        out,
        "<p><span id=\"slot-count\">{}</span> slot(s).</p><table id=\"slot-states\" \
         class=\"grid\"><thead><tr><th>State</th><th>Activity</th><th>Slots</th></tr></thead>\
         <tbody>",
        slots.len()
    );
    for ((state, activity), n) in &by {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{n}</td></tr>",
            esc(state),
            esc(activity)
        );
    }
    out.push_str(
        "</tbody></table><table id=\"slots\" class=\"grid\"><thead><tr><th>Slot</th>\
         <th>State</th><th>Activity</th><th>Cpus</th><th>Memory</th><th>Job</th><th>User</th>\
         </tr></thead><tbody>",
    );
    for s in slots.iter().take(MAX_SLOT_ROWS) {
        let num = |n: &str| int(s, n).map(|v| v.to_string()).unwrap_or_default();
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td>{}</td><td>{}</td></tr>",
            esc(&string(s, "Name")),
            esc(&string(s, "State")),
            esc(&string(s, "Activity")),
            num("Cpus"),
            num("Memory"),
            esc(&string(s, "JobId")),
            esc(&string(s, "RemoteOwner"))
        );
    }
    out.push_str("</tbody></table>");
    if slots.len() > MAX_SLOT_ROWS {
        let _ = write!(out, "<p class=\"note\">The first {MAX_SLOT_ROWS} slots are listed.</p>");
    }
}

fn users_html(out: &mut String, s: &SummaryReply) {
    #[derive(Default)]
    struct Row {
        idle: u64,
        run: u64,
        held: u64,
        suspended: u64,
        done: u64,
    }
    let mut by: std::collections::BTreeMap<&str, Row> = Default::default();
    for r in &s.rows {
        let e = by.entry(r.owner.as_str()).or_default();
        e.idle += r.idle;
        e.run += r.run;
        e.held += r.held;
        e.suspended += r.suspended;
        e.done += r.done;
    }
    out.push_str(
        "<table id=\"users\" class=\"grid\"><thead><tr><th>User</th><th>Idle</th>\
         <th>Running</th><th>Held</th><th>Suspended</th><th>Done</th></tr></thead><tbody>",
    );
    for (owner, r) in &by {
        let _ = write!(
            out,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(owner),
            r.idle,
            r.run,
            r.held,
            r.suspended,
            r.done
        );
    }
    if by.is_empty() {
        out.push_str("<tr><td colspan=\"6\">No jobs in the queue.</td></tr>");
    }
    let t = &s.totals;
    let _ = write!(
        out,
        "</tbody></table><p id=\"totals\">The whole queue ({}): {} jobs; {} idle, {} running, \
         {} held, {} suspended, {} completed and {} removed still leaving.</p>",
        esc(&s.schedd),
        t.jobs,
        t.idle,
        t.running,
        t.held,
        t.suspended,
        t.completed,
        t.removed
    );
}

async fn series_json(State(d): State<Arc<Dash>>) -> Response {
    let s = d.series.lock().map(|s| s.clone()).unwrap_or_default();
    axum::Json(s).into_response()
}

/// Keeps the plots' data, every [`SAMPLE_EVERY`]. The queue's jobs are read once, at
/// start (their QDates make the depth of the hour before); from then on each round
/// costs the schedd little whatever its size: the queue's depth from its summary,
/// and only the jobs that left the queue since the last round (history, newest
/// first, read until a job seen before).
async fn sample(d: Arc<Dash>) {
    let projection: Vec<String> =
        ["ClusterId", "ProcId", "QDate", "CompletionDate", "EnteredCurrentStatus", "JobStatus"]
            .map(String::from)
            .to_vec();
    let id = |ad: &ClassAd| (int(ad, "ClusterId").unwrap_or(-1), int(ad, "ProcId").unwrap_or(-1));
    // Each job's times, by id: from the queue at start, replaced from history.
    let mut known: std::collections::HashMap<(i64, i64), JobTimes> = Default::default();
    let mut seen_queue = false;
    let mut seen_history = false;
    loop {
        let now = super::client::now();
        let since = now - series::WINDOW - series::STEP;
        if !seen_queue {
            let req = QueryRequest {
                targets: Targets::default(),
                projection: projection.clone(),
                limit: Some(MAX_SERIES_JOBS),
                mine: d.mine,
                group_by: None,
            };
            match d.ads("/v1/query", &req).await {
                Ok(ads) => {
                    for ad in &ads {
                        if let Some(t) = JobTimes::from_ad(ad) {
                            known.entry(id(ad)).or_insert(t);
                        }
                    }
                    seen_queue = true;
                }
                Err(e) => tracing::warn!("dashboard: reading the queue for the plots: {e}"),
            }
        }
        let mut limit = if seen_history { 256 } else { HISTORY_PRIME };
        loop {
            let req = HistoryRequest {
                constraint: None,
                owners: Vec::new(),
                limit: Some(limit),
                projection: projection.clone(),
            };
            let ads = match d.ads("/v1/history", &req).await {
                Ok(ads) => ads,
                Err(e) => {
                    tracing::warn!("dashboard: reading history for the plots: {e}");
                    break;
                }
            };
            let mut overlap = false;
            for ad in &ads {
                let Some(t) = JobTimes::from_ad(ad) else { continue };
                if t.ended.is_some_and(|e| e < since) {
                    // Older than the window: so is the rest.
                    overlap = true;
                    break;
                }
                overlap |= known.insert(id(ad), t) == Some(t);
            }
            seen_history = true;
            if overlap || ads.len() < limit || limit >= MAX_SERIES_JOBS {
                break;
            }
            limit = (limit * 4).min(MAX_SERIES_JOBS);
        }
        known.retain(|_, j| j.ended.is_none_or(|e| e >= since));
        let summary = SummaryRequest { owners: Vec::new(), mine: d.mine };
        let depth = match d.call::<_, SummaryReply>(&d.schedd, "/v1/summary", &summary).await {
            Ok(r) => Some(r.rows.iter().map(|r| r.idle + r.run + r.held + r.suspended).sum()),
            Err(e) => {
                tracing::warn!("dashboard: reading the queue's depth: {e}");
                None
            }
        };
        let jobs: Vec<JobTimes> = known.values().copied().collect();
        let samples: Vec<Sample> = match d.samples.lock() {
            Ok(mut s) => {
                if let Some(depth) = depth {
                    s.push_back(Sample { t: now, depth });
                }
                while s.front().is_some_and(|x| x.t < since) {
                    s.pop_front();
                }
                s.iter().copied().collect()
            }
            Err(_) => Vec::new(),
        };
        let s = series::series(now, &jobs, &samples);
        if let Ok(mut slot) = d.series.lock() {
            *slot = s;
        }
        tokio::time::sleep(SAMPLE_EVERY).await;
    }
}

// ---------------------------------------------------------------------------
// The job table

fn encode(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
}

async fn jobs_page(
    State(d): State<Arc<Dash>>,
    Extension(base): Extension<Base>,
    uri: Uri,
) -> Response {
    let constraint = param(&uri, "constraint").unwrap_or_default();
    let live = jobs(&d, &constraint).await;
    html_response(html::page(
        &base.0,
        "jobs",
        &format!(
            "<h1>Jobs</h1><form id=\"filter\" method=\"get\" action=\"jobs\">\
             <label for=\"constraint\">Constraint (as <code>andes q -constraint</code>)</label> \
             <input id=\"constraint\" name=\"constraint\" size=\"60\" maxlength=\"{MAX_CONSTRAINT}\" \
             value=\"{c}\" placeholder=\"JobStatus == 1 &amp;&amp; Owner == &quot;alice&quot;\"> \
             <button type=\"submit\">Filter</button></form>\
             <div id=\"job-table\" data-live=\"live/jobs?constraint={q}\">{live}</div>",
            c = esc(&constraint),
            q = esc(&encode(&constraint)),
        ),
    ))
}

async fn jobs_live(State(d): State<Arc<Dash>>, uri: Uri) -> Response {
    let constraint = param(&uri, "constraint").unwrap_or_default();
    html_response(jobs(&d, &constraint).await)
}

async fn jobs(d: &Dash, constraint: &str) -> String {
    let constraint = constraint.trim();
    if constraint.len() > MAX_CONSTRAINT {
        return format!(
            "<p class=\"error\" id=\"constraint-error\">The constraint is longer than \
             {MAX_CONSTRAINT} bytes.</p>"
        );
    }
    let constraint = (!constraint.is_empty()).then(|| constraint.to_string());
    let projection: Vec<String> = html::JOB_COLUMNS.iter().map(|s| s.to_string()).collect();
    let queue = QueryRequest {
        targets: Targets { constraint: constraint.clone(), ..Targets::default() },
        projection: projection.clone(),
        limit: Some(MAX_ROWS + 1),
        mine: d.mine,
        group_by: None,
    };
    let history = HistoryRequest {
        constraint: constraint.clone(),
        owners: Vec::new(),
        limit: Some(HISTORY_ROWS),
        projection,
    };
    let (q, h) = tokio::join!(d.ads("/v1/query", &queue), d.ads("/v1/history", &history));
    let mut out = String::new();
    let q = match q {
        Ok(q) => q,
        Err(e) => {
            let _ = write!(
                out,
                "<p class=\"error\" id=\"constraint-error\">The schedd refused the query: {}</p>",
                esc(&e)
            );
            return out;
        }
    };
    out.push_str(html::JOB_TABLE_HEAD);
    html::job_rows(&mut out, &q[..q.len().min(MAX_ROWS)], "queue");
    let h = h.unwrap_or_else(|e| {
        let _ = write!(out, "</tbody></table>{}", html::error("history", &e));
        out.push_str(html::JOB_TABLE_HEAD);
        Vec::new()
    });
    html::job_rows(&mut out, &h, "history");
    if q.is_empty() && h.is_empty() {
        out.push_str("<tr><td colspan=\"8\">No job matches.</td></tr>");
    }
    out.push_str("</tbody></table>");
    if q.len() > MAX_ROWS {
        let _ = write!(
            out,
            "<p class=\"note\" id=\"capped\">The first {MAX_ROWS} jobs of the queue are shown: \
             narrow the constraint to see others.</p>"
        );
    }
    let _ = write!(
        out,
        "<p class=\"note\">The queue's jobs, then the latest {HISTORY_ROWS} that left it.</p>"
    );
    out
}

// ---------------------------------------------------------------------------
// A job

fn parse_job(id: &str) -> Option<JobId> {
    match id.parse::<JobSelector>() {
        Ok(JobSelector::Job(j)) => Some(j),
        _ => None,
    }
}

async fn job_page(
    State(d): State<Arc<Dash>>,
    Extension(base): Extension<Base>,
    UrlPath(id): UrlPath<String>,
) -> Response {
    let Some(job) = parse_job(&id) else {
        return (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            html::page(
                &base.0,
                "no such job",
                &format!("<p class=\"error\">`{}` is not a job id (C.P).</p>", esc(&id)),
            ),
        )
            .into_response();
    };
    let live = job_html(&d, job).await;
    html_response(html::page(
        &base.0,
        &format!("job {job}"),
        &format!("<h1>Job {job}</h1><div id=\"job\" data-live=\"live/job/{job}\">{live}</div>"),
    ))
}

async fn job_live(State(d): State<Arc<Dash>>, UrlPath(id): UrlPath<String>) -> Response {
    match parse_job(&id) {
        Some(job) => html_response(job_html(&d, job).await),
        None => (StatusCode::NOT_FOUND, "not a job id\n").into_response(),
    }
}

/// The job's ad, from the queue or else from history, and which.
async fn job_ad(d: &Dash, job: JobId) -> Result<Option<(ClassAd, &'static str)>, String> {
    let req = QueryRequest {
        targets: Targets { ids: vec![JobSelector::Job(job)], ..Targets::default() },
        projection: Vec::new(),
        limit: Some(1),
        mine: false,
        group_by: None,
    };
    if let Some(ad) = d.ads("/v1/query", &req).await?.into_iter().next() {
        return Ok(Some((ad, "queue")));
    }
    let req = HistoryRequest {
        constraint: Some(format!("ClusterId == {} && ProcId == {}", job.cluster, job.proc)),
        owners: Vec::new(),
        limit: Some(1),
        projection: Vec::new(),
    };
    Ok(d.ads("/v1/history", &req).await?.into_iter().next().map(|ad| (ad, "history")))
}

async fn job_html(d: &Dash, job: JobId) -> String {
    let (ad, from) = match job_ad(d, job).await {
        Ok(Some(found)) => found,
        Ok(None) => {
            return format!(
                "<p class=\"error\" id=\"no-job\">No job {job} in the queue or its history.</p>"
            );
        }
        Err(e) => return html::error("the schedd", &e),
    };
    let code = int(&ad, "JobStatus").unwrap_or(0);
    let mut out = String::new();
    let _ = write!(
        out,
        "<p>Status: <span id=\"job-status\" class=\"status\">{}</span> · owner {} · in the {from} \
         · submitted {} · {}</p>",
        html::status_name(code),
        esc(&string(&ad, "Owner")),
        esc(&html::when(int(&ad, "QDate").unwrap_or(0))),
        esc(&crate::cmd::q::cmd_line(&ad)),
    );
    let events = if !d.is_mine(&ad) {
        Err("the job is another user's: its event log is not read here".to_string())
    } else {
        match andes_schedd::eventlog::log_path(&ad) {
            None => Err("the job has no event log (UserLog)".to_string()),
            Some(path) => tokio::task::spawn_blocking(move || read_events(&path, job))
                .await
                .unwrap_or_else(|e| Err(e.to_string())),
        }
    };
    out.push_str("<section><h2>Output</h2>");
    out.push_str(&output_html(d, &ad, job, code).await);
    out.push_str("</section><section><h2>Event log</h2>");
    match &events {
        Ok(ev) => timeline_html(&mut out, ev),
        Err(e) => {
            let _ = write!(out, "<p class=\"note\">{}</p>", esc(e));
        }
    }
    if andes_job::dagman::is_dagman(&ad) && d.is_mine(&ad) {
        out.push_str("</section><section><h2>DAG</h2>");
        out.push_str(&dag::section(d, &ad).await);
    }
    out.push_str("</section><section><h2>Checkpoints</h2>");
    checkpoints_html(&mut out, &ad, events.as_deref().unwrap_or(&[]));
    out.push_str("</section><section><h2>Route</h2>");
    route_html(&mut out, &ad);
    out.push_str("</section><section><h2>Job ad</h2>");
    out.push_str(&html::ad_table(&ad));
    out.push_str("</section>");
    out
}

/// The job's events from its log (its latest [`MAX_EVENTS`]), reading at most the
/// last [`MAX_FILE_TAIL`] bytes of the file.
fn read_events(path: &Path, job: JobId) -> Result<Vec<JobEvent>, String> {
    let (text, cut) = read_tail(path, MAX_FILE_TAIL)?;
    let text = if cut {
        // Start at the first whole event.
        match text.find("\n...\n") {
            Some(i) => &text[i + 5..],
            None => "",
        }
    } else {
        &text[..]
    };
    let mut events: Vec<JobEvent> = userlog::parse_log(text, &ParseOptions::default())
        .map_err(|e| format!("{}: not an event log from line {} on", path.display(), e.line))?
        .into_iter()
        .filter(|e| e.id.job() == Some(job))
        .collect();
    if events.len() > MAX_EVENTS {
        events.drain(..events.len() - MAX_EVENTS);
    }
    Ok(events)
}

/// The last `max` bytes of a regular file, as text; and whether that is not all of it.
fn read_tail(path: &Path, max: u64) -> Result<(String, bool), String> {
    use std::io::{Read, Seek};
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    // Opened without following a link at its end, and read only if a
    // regular file (never a FIFO, which would block).
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let mut f = o.open(path).map_err(fail)?;
    let meta = f.metadata().map_err(fail)?;
    if !meta.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let start = meta.len().saturating_sub(max);
    f.seek(std::io::SeekFrom::Start(start)).map_err(fail)?;
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes).map_err(fail)?;
    Ok((String::from_utf8_lossy(&bytes).into_owned(), start > 0))
}

fn timeline_html(out: &mut String, events: &[JobEvent]) {
    if events.is_empty() {
        out.push_str("<p class=\"note\">No event of this job in its log yet.</p>");
        return;
    }
    out.push_str("<ol id=\"timeline\" class=\"timeline\">");
    for e in events {
        let text = e.to_text(&userlog::FormatOptions::utc());
        let mut lines = text.lines();
        // `NNN (C.P.S) DATE TIME what happened`, then the details.
        let head = lines.next().unwrap_or("").splitn(5, ' ').nth(4).unwrap_or("").to_string();
        let details: Vec<&str> =
            lines.map(str::trim).filter(|l| !l.is_empty() && *l != "...").collect();
        let mut details = details.join("\n");
        if details.len() > 2000 {
            let mut cut = 2000;
            while !details.is_char_boundary(cut) {
                cut -= 1;
            }
            details.truncate(cut);
            details.push('…');
        }
        let _ = write!(
            out,
            "<li class=\"ev-{:03}\"><time>{}</time> <b>{}</b> <span class=\"ev-name\">{}</span>\
             <div class=\"ev-details\">{}</div></li>",
            e.kind.number(),
            esc(&html::when(e.time.as_second())),
            esc(&head),
            esc(e.kind.name()),
            esc(&details)
        );
    }
    out.push_str("</ol>");
}

async fn output_html(d: &Dash, ad: &ClassAd, job: JobId, code: i64) -> String {
    if matches!(JobStatus::from_code(code), Some(JobStatus::Running)) {
        let req = TailJobRequest { job, stderr: false, offset: None, max: OUTPUT_TAIL };
        return match d.call::<_, TailReply>(&d.schedd, "/v1/tail", &req).await {
            Ok(r) => format!(
                "<p class=\"note\">The last {} of {} bytes written so far, from its host.</p>\
                 <pre id=\"output\">{}</pre>",
                r.data.len(),
                r.size,
                esc(&String::from_utf8_lossy(&r.data))
            ),
            Err(e) => html::error("its output", &e),
        };
    }
    if !d.is_mine(ad) {
        return "<p class=\"note\">The job is another user's: its output file is not read here.</p>"
            .to_string();
    }
    let out = string(ad, "Out");
    if out.is_empty() || out == "/dev/null" {
        return "<p class=\"note\">The job keeps no output file.</p>".to_string();
    }
    let mut path = PathBuf::from(&out);
    let iwd = string(ad, "Iwd");
    if path.is_relative() && !iwd.is_empty() {
        path = Path::new(&iwd).join(path);
    }
    match tokio::task::spawn_blocking(move || read_tail(&path, OUTPUT_TAIL))
        .await
        .unwrap_or_else(|e| Err(e.to_string()))
    {
        Ok((text, cut)) => format!(
            "<p class=\"note\">{} ({}).</p><pre id=\"output\">{}</pre>",
            esc(&out),
            if cut { "its end" } else { "all of it" },
            esc(&text)
        ),
        Err(e) => format!("<p class=\"note\">No output to show yet: {}</p>", esc(&e)),
    }
}

fn checkpoints_html(out: &mut String, ad: &ClassAd, events: &[JobEvent]) {
    let n = int(ad, "NumCkpts").unwrap_or(0);
    let kind = string(ad, "WasmCheckpoint");
    if n == 0 && kind.is_empty() {
        out.push_str("<p class=\"note\" id=\"checkpoints\">No checkpoint.</p>");
        return;
    }
    let _ = write!(
        out,
        "<table id=\"checkpoints\" class=\"grid\"><tbody>\
         <tr><th>Kind</th><td>{}</td></tr><tr><th>Checkpoints taken</th><td>{n}</td></tr>\
         <tr><th>Latest</th><td>{}</td></tr><tr><th>Its size</th><td>{}</td></tr>\
         <tr><th>Its platform</th><td>{}</td></tr><tr><th>Restarts from one</th><td>{}</td></tr>\
         </tbody></table>",
        esc(if kind.is_empty() { "checkpoint_exit_code" } else { &kind }),
        esc(&html::when(int(ad, "LastCkptTime").unwrap_or(0))),
        int(ad, "CkptSize").map(|k| format!("{k} KiB")).unwrap_or_default(),
        esc(&string(ad, "LastCheckpointPlatform")),
        int(ad, "NumRestarts").unwrap_or(0),
    );
    // The log records a checkpoint taken as a job left its slot (004, "Job was
    // checkpointed"), and 003 where a writer records one; periodic ones leave no event.
    let taken: Vec<(&JobEvent, &str)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            userlog::EventKind::Checkpointed(_) => Some((e, "checkpointed, running on")),
            userlog::EventKind::Evicted(v)
                if matches!(v.eviction, userlog::Eviction::Checkpointed) =>
            {
                Some((e, "checkpointed as it left its slot"))
            }
            _ => None,
        })
        .collect();
    if !taken.is_empty() {
        out.push_str("<p>Checkpoints in the event log:</p><ul id=\"checkpoint-events\">");
        for (e, what) in taken {
            let _ = write!(out, "<li>{} {what}</li>", esc(&html::when(e.time.as_second())));
        }
        out.push_str("</ul>");
    }
    out.push_str(
        "<p class=\"note\">The schedd keeps the latest checkpoint only: the size is that \
         one's; periodic checkpoints are counted, not listed.</p>",
    );
}

fn route_html(out: &mut String, ad: &ClassAd) {
    let attrs = [
        "RouteName",
        "RoutedToJobId",
        "LastRoutedToJobId",
        "GridResource",
        "GridJobId",
        "GridJobStatus",
        "RoutedBy",
        "RoutedFromSchedd",
    ];
    let present: Vec<&str> = attrs.into_iter().filter(|a| ad.contains(a)).collect();
    if present.is_empty() {
        out.push_str("<p class=\"note\" id=\"route\">Not routed.</p>");
        return;
    }
    out.push_str("<table id=\"route\" class=\"grid\"><tbody>");
    for a in present {
        let v = match ad.eval_attr(a) {
            classad::Value::Str(s) => s.to_string(),
            other => {
                let mut s = String::new();
                classad::unparse::value_to(&mut s, &other);
                s
            }
        };
        let _ = write!(out, "<tr><th>{a}</th><td>{}</td></tr>", esc(&v));
    }
    out.push_str("</tbody></table>");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_hex_and_compared_whole() {
        let t = new_token();
        assert_eq!(t.len(), 64);
        assert!(t.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(t, new_token());
        assert!(token_matches(&t, &t.clone()));
        assert!(!token_matches(&t, &t[..63]));
        assert!(!token_matches(&t, ""));
        let mut other = t.clone().into_bytes();
        other[63] = if other[63] == b'0' { b'1' } else { b'0' };
        assert!(!token_matches(&t, &String::from_utf8(other).unwrap()));
    }

    #[test]
    fn bearers_are_read_exactly() {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_static("Bearer tok"));
        assert!(has_bearer(&h, "tok"));
        assert!(!has_bearer(&h, "to"));
    }

    #[test]
    fn checkpoints_and_routes_come_from_the_ad() {
        let ad = classad::parse_ad(
            "[NumCkpts = 3; LastCkptTime = 1700000000; CkptSize = 2048; \
             LastCheckpointPlatform = \"x86_64 <linux>\"; WasmCheckpoint = \"transparent\"; \
             RouteName = \"<b>site</b>\"; GridResource = \"andes 127.0.0.1:9\"]",
        )
        .unwrap();
        let mut out = String::new();
        checkpoints_html(&mut out, &ad, &[]);
        assert!(out.contains("<td>3</td>") && out.contains("2048 KiB"), "{out}");
        assert!(out.contains("transparent") && out.contains("x86_64 &lt;linux&gt;"), "{out}");
        let mut out = String::new();
        route_html(&mut out, &ad);
        assert!(out.contains("&lt;b&gt;site&lt;/b&gt;") && out.contains("andes 127.0.0.1:9"));
        let plain = classad::parse_ad("[JobStatus = 1]").unwrap();
        let mut out = String::new();
        checkpoints_html(&mut out, &plain, &[]);
        route_html(&mut out, &plain);
        assert!(out.contains("No checkpoint.") && out.contains("Not routed."), "{out}");
    }

    #[test]
    fn query_parameters_are_decoded() {
        let p = params("constraint=JobStatus+%3D%3D+1%20%26%26+Owner%3D%3D%22a%22&x");
        assert_eq!(p[0], ("constraint".into(), "JobStatus == 1 && Owner==\"a\"".into()));
        assert_eq!(p[1], ("x".into(), String::new()));
        assert_eq!(encode("a b&c"), "a%20b%26c");
    }
}
