"""Real servers on 127.0.0.1 for the remote-dataset tests (tests/python/test_remote.py):

- Nginx: Debian's nginx serving a directory (ranged GETs, keep-alive), as a static host would.
- S3rver: the s3rver S3 server from the npm registry (tests/remote/s3server, installed by
  scripts/install-deps.sh). s3rver does not check SigV4 signatures, so every S3 request goes
  through a FaultProxy that checks them (check_sigv4), following AWS's published SigV4 rules.
- FaultProxy: a small HTTP forwarder in front of either server that counts requests and, on a
  chosen share of them, delays, resets the connection, answers 503, flips a byte of the body or
  stops answering.

Nothing here is packrec's: these are the peers packrec's reader is tested against.
"""
import datetime
import hashlib
import hmac
import http.client
import http.server
import os
import pathlib
import random
import shutil
import socket
import socketserver
import struct
import subprocess
import tempfile
import threading
import time
import urllib.parse

S3SERVER_DIR = pathlib.Path(__file__).resolve().parents[1] / "remote" / "s3server"
ACCESS_KEY = "S3RVER"  # s3rver's built-in account
SECRET_KEY = "S3RVER"
REGION = "us-east-1"


class Unavailable(Exception):
    """A server this machine cannot start (not installed): the test skips with the reason."""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_port(port, process, what, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen on port {port} within {seconds} s")


class Nginx:
    """nginx serving `root` on 127.0.0.1; url is http://127.0.0.1:PORT."""

    def __init__(self, root, workdir):
        binary = shutil.which("nginx") or "/usr/sbin/nginx"
        if not os.path.exists(binary):
            raise Unavailable("nginx is not installed (scripts/install-deps.sh installs nginx-light)")
        self.port = free_port()
        workdir = pathlib.Path(workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        temp = workdir / "temp"
        temp.mkdir(exist_ok=True)
        config = workdir / "nginx.conf"
        # As root, nginx's workers would drop to "nobody", who cannot read pytest's 0700
        # directories: they stay the user running the tests.
        user = "user root;\n" if os.geteuid() == 0 else ""
        config.write_text(f"""daemon off;
{user}worker_processes 1;
pid {workdir}/nginx.pid;
error_log {workdir}/error.log;
events {{}}
http {{
  access_log {workdir}/access.log;
  client_body_temp_path {temp}; proxy_temp_path {temp}; fastcgi_temp_path {temp};
  uwsgi_temp_path {temp}; scgi_temp_path {temp};
  keepalive_requests 100000;
  server {{ listen 127.0.0.1:{self.port}; root {root}; }}
}}
""")
        self.access_log = workdir / "access.log"
        self.process = subprocess.Popen([binary, "-c", str(config), "-p", str(workdir)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wait_for_port(self.port, self.process, "nginx")
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)


class S3rver:
    """s3rver keeping its objects under `workdir`, with `bucket` made; url is its endpoint."""

    def __init__(self, workdir, bucket):
        binary = S3SERVER_DIR / "node_modules" / ".bin" / "s3rver"
        if not binary.exists():
            raise Unavailable(f"{binary} is missing (scripts/install-deps.sh installs it with npm)")
        if not shutil.which("node"):
            raise Unavailable("node is not installed")
        self.port = free_port()
        data = pathlib.Path(workdir) / "s3data"
        data.mkdir(parents=True, exist_ok=True)
        self.log = open(pathlib.Path(workdir) / "s3rver.log", "wb")
        self.process = subprocess.Popen(
            [str(binary), "-d", str(data), "-a", "127.0.0.1", "-p", str(self.port),
             "--configure-bucket", bucket, "--silent"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for_port(self.port, self.process, "s3rver")
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
        self.log.close()


def upload_tree(endpoint, bucket, prefix, directory):
    """Uploads every file of `directory` to s3://bucket/prefix/NAME with curl's own SigV4 (an
    independent client: GNU curl's command line, not packrec)."""
    for path in sorted(pathlib.Path(directory).iterdir()):
        url = f"{endpoint}/{bucket}/{prefix}/{urllib.parse.quote(path.name)}"
        subprocess.run(
            ["curl", "-sS", "--fail", "-T", str(path), "--aws-sigv4", f"aws:amz:{REGION}:s3",
             "--user", f"{ACCESS_KEY}:{SECRET_KEY}", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD",
             url], check=True, stdout=subprocess.DEVNULL)


def s3_object(endpoint, bucket, key, head=False):
    """(HTTP status, headers lowercased, body) of a GET or HEAD of s3://bucket/key, asked with
    curl's own SigV4: an independent client to look at what packrec uploaded."""
    url = f"{endpoint}/{bucket}/{urllib.parse.quote(key)}"
    with tempfile.NamedTemporaryFile() as body:
        run = subprocess.run(
            ["curl", "-sS", "-D", "-", *(["-I"] if head else ["-o", body.name]),
             "--aws-sigv4", f"aws:amz:{REGION}:s3", "--user", f"{ACCESS_KEY}:{SECRET_KEY}",
             "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", url], capture_output=True,
            check=True)
        payload = pathlib.Path(body.name).read_bytes()
    lines = run.stdout.decode().split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()
    return status, headers, payload


def s3_environment(endpoint):
    """The AWS_* variables that point packrec (and AWS's tools) at the test server `endpoint`."""
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_REGION": REGION, "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY}


def assert_extracts_equal(cli, dataset, local, work, count=120):
    """`packrec extract` of `dataset` writes the same `count` files, byte for byte, as of
    `local` (`cli` runs the packrec CLI and checks its exit status)."""
    cli("extract", dataset, work / "got")
    cli("extract", local, work / "want")
    want = sorted(p.relative_to(work / "want") for p in (work / "want").rglob("*") if p.is_file())
    assert len(want) == count
    for name in want:
        assert (work / "got" / name).read_bytes() == (work / "want" / name).read_bytes()


def _sign(key, text):
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def check_sigv4(method, raw_path, headers, secrets):
    """None when the request carries a valid AWS SigV4 Authorization header for one of `secrets`
    ({access key: secret}), else why not. Follows AWS's published SigV4 rules for S3 (canonical
    request, string to sign, signing key), independently of libcurl's code."""
    auth = headers.get("authorization", "")
    if not auth.startswith("AWS4-HMAC-SHA256 "):
        return "no SigV4 Authorization header"
    fields = dict(part.strip().split("=", 1) for part in auth[len("AWS4-HMAC-SHA256 "):].split(","))
    access_key, date, region, service, terminal = fields["Credential"].split("/")
    if access_key not in secrets:
        return f"unknown access key {access_key}"
    if service != "s3" or terminal != "aws4_request":
        return f"credential scope {fields['Credential']} is not for s3"
    signed = fields["SignedHeaders"].split(";")
    for needed in ("host", "x-amz-date", "x-amz-content-sha256"):
        if needed not in signed:
            return f"{needed} is not signed"
    for name in headers:
        if name.startswith("x-amz-") and name not in signed:
            return f"{name} is sent but not signed"
    amz_date = headers["x-amz-date"]
    when = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ").replace(
        tzinfo=datetime.timezone.utc)
    if abs((datetime.datetime.now(datetime.timezone.utc) - when).total_seconds()) > 900:
        return f"x-amz-date {amz_date} is more than 15 minutes off"
    path, _, query = raw_path.partition("?")
    pairs = sorted(urllib.parse.parse_qsl(query, keep_blank_values=True))
    canonical_query = "&".join(
        f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
        for k, v in pairs)
    canonical_headers = "".join(f"{name}:{' '.join(headers[name].split())}\n" for name in signed)
    canonical = "\n".join([method, path, canonical_query, canonical_headers, ";".join(signed),
                           headers["x-amz-content-sha256"]])
    scope = f"{date}/{region}/{service}/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                         hashlib.sha256(canonical.encode()).hexdigest()])
    key = _sign(("AWS4" + secrets[access_key]).encode(), date)
    key = _sign(_sign(_sign(key, region), service), "aws4_request")
    expected = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, fields["Signature"]):
        return "signature does not match"
    return None


class FaultProxy:
    """Forwards HTTP/1.1 requests to `upstream` (http://127.0.0.1:PORT), keeping connections
    alive. Settable at any time (attributes): delay_ms per request, reset_share, error_share
    (answered 503), flip_share (one body byte flipped, only in 206 answers), stall (accept and
    never answer), deny_methods (answered 403), sigv4_secrets (check every request's signature; 403 when wrong). Counts
    requests and the Range headers it saw."""

    def __init__(self, upstream, seed=1):
        self.upstream = urllib.parse.urlparse(upstream)
        self.delay_ms = 0
        self.reset_share = 0.0
        self.error_share = 0.0
        self.flip_share = 0.0
        self.stall = False
        self.deny_methods = set()  # e.g. {"PUT"}: answered 403 AccessDenied
        self.sigv4_secrets = None
        self.lock = threading.Lock()
        self.random = random.Random(seed)
        self.requests = 0
        self.faults = 0
        self.ranges = []
        self.signature_failures = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                try:
                    proxy._handle(self)
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client gave up on this answer

            do_HEAD = do_PUT = do_POST = do_DELETE = do_GET

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.local = threading.local()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()

    def reset_counts(self):
        with self.lock:
            self.requests = 0
            self.faults = 0
            self.ranges = []

    def _draw(self, share):
        with self.lock:
            return share > 0 and self.random.random() < share

    def _upstream(self):
        connection = getattr(self.local, "connection", None)
        if connection is None:
            connection = http.client.HTTPConnection(self.upstream.hostname, self.upstream.port,
                                                    timeout=60)
            self.local.connection = connection
        return connection

    def _handle(self, handler):
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        with self.lock:
            self.requests += 1
            self.ranges.append((handler.path, handler.headers.get("Range")))
        if self.stall:
            time.sleep(3600)
        if self.delay_ms:
            time.sleep(self.delay_ms / 1000)
        headers = {name.lower(): value for name, value in handler.headers.items()}
        if self.sigv4_secrets is not None:
            problem = check_sigv4(handler.command, handler.path, headers, self.sigv4_secrets)
            if problem:
                with self.lock:
                    self.signature_failures.append(f"{handler.command} {handler.path}: {problem}")
                self._answer(handler, 403, {}, (
                    "<Error><Code>SignatureDoesNotMatch</Code><Message>" + problem +
                    "</Message></Error>").encode())
                return
        if handler.command in self.deny_methods:
            self._answer(handler, 403, {}, b"<Error><Code>AccessDenied</Code></Error>")
            return
        if self._draw(self.reset_share):
            with self.lock:
                self.faults += 1
            # RST, not FIN: the client sees "connection reset by peer".
            handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                          struct.pack("ii", 1, 0))
            handler.close_connection = True
            handler.connection.close()
            return
        if self._draw(self.error_share):
            with self.lock:
                self.faults += 1
            self._answer(handler, 503, {}, b"<Error><Code>SlowDown</Code></Error>")
            return
        forward = {k: v for k, v in handler.headers.items() if k.lower() != "connection"}
        for attempt in range(2):
            connection = self._upstream()
            try:
                connection.request(handler.command, handler.path, body=body, headers=forward)
                response = connection.getresponse()
                payload = response.read()
                break
            except (ConnectionError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
                if attempt:
                    raise
        answer_headers = {k: v for k, v in response.getheaders()
                          if k.lower() not in ("connection", "transfer-encoding", "content-length",
                                               "keep-alive")}
        if response.status == 206 and payload and self._draw(self.flip_share):
            with self.lock:
                self.faults += 1
            flipped = bytearray(payload)
            flipped[len(flipped) // 2] ^= 0x10
            payload = bytes(flipped)
        if handler.command == "HEAD":  # no body: the object's length is passed on as it is
            self._answer(handler, response.status, answer_headers, b"",
                         length=int(response.getheader("Content-Length") or 0))
            return
        self._answer(handler, response.status, answer_headers, payload, length=len(payload))

    @staticmethod
    def _answer(handler, status, headers, payload, length=None):
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(payload) if length is None else length))
        handler.end_headers()
        if payload and handler.command != "HEAD":  # a HEAD answer has no body, whatever its status
            handler.wfile.write(payload)


DELAY_PROXY = r"""
import asyncio, sys
upstream_port, delay = int(sys.argv[1]), float(sys.argv[2]) / 1000

async def pipe(reader, writer, pause):
    # Each chunk is passed on `pause` after it arrived, while later chunks keep arriving: a link
    # with that latency, not a bandwidth cap (a long upload pays the latency once, not per chunk).
    loop = asyncio.get_running_loop()
    queue = asyncio.Queue()

    async def receive():
        try:
            while data := await reader.read(1 << 16):
                await queue.put((loop.time() + pause, data))
        except (ConnectionError, asyncio.CancelledError):
            pass
        await queue.put((0, b""))

    receiving = asyncio.ensure_future(receive())
    try:
        while True:
            due, data = await queue.get()
            if not data:
                break
            if due > loop.time():
                await asyncio.sleep(due - loop.time())
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        receiving.cancel()
        writer.close()

async def serve(client_reader, client_writer):
    up_reader, up_writer = await asyncio.open_connection("127.0.0.1", upstream_port)
    await asyncio.gather(pipe(client_reader, up_writer, delay), pipe(up_reader, client_writer, 0))

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""


class DelayProxy:
    """A TCP forwarder in a process of its own that holds each chunk a client sends (an HTTP
    request, an upload's body) for `delay_ms` after it arrived before passing it on, later chunks
    arriving meanwhile: every request pays the latency once, as over a network, without parsing
    HTTP (the benchmarks use it; FaultProxy is too slow to measure
    through). Answers are passed on as they come."""

    def __init__(self, upstream, delay_ms):
        port = urllib.parse.urlparse(upstream).port
        self.process = subprocess.Popen(
            [os.environ.get("PYTHON", "/usr/bin/python3"), "-c", DELAY_PROXY, str(port),
             str(delay_ms)], stdout=subprocess.PIPE, text=True)
        self.port = int(self.process.stdout.readline())
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.process.terminate()
        self.process.wait(timeout=10)
