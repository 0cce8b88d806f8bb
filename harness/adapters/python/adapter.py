#!/usr/bin/env python3
"""Example adapter (protocol 2): the MODULES profile of seed 000, written from the seed alone.

Persistent mode (default): one JSON request per stdin line, one reply per stdout line.
One-shot mode (--one-shot): the whole case on stdin, {"observations": [...]} on stdout.
Python 3 standard library only. See README.md for what it implements and what it does not.
"""
import hashlib, json, os, posixpath, shutil, stat, sys

sys.dont_write_bytecode = True  # never leave a __pycache__ beside the adapter
from frontmatter import Refusal, parse_module  # noqa: E402

CAP = 256 * 1024  # CONTEXT_FILE_MAX_BYTES: a file above it is refused whole
NAMES = ["AGENTS.override.md", "AGENTS.md", "AGENTS.MD", "CLAUDE.md", "CLAUDE.MD"]
BOM = b"\xef\xbb\xbf"
ESCAPE, OVERSIZED, FAILED = ("brain.instruction_module_escape", "brain.context_file_oversized",
                             "brain.instruction_activation_failed")
# The suite's own codes this adapter emits, under the suite's names (declared in hello.codes).
CODES = ["frontmatter.unterminated", "frontmatter.malformed_opening", "frontmatter.invalid_yaml",
         "frontmatter.not_a_mapping", "frontmatter.unknown_key", "frontmatter.paths_not_a_list",
         "frontmatter.paths_empty", "frontmatter.path_not_a_string", "frontmatter.path_empty",
         "glob.absolute", "glob.backslash", "glob.parent_segment", "glob.invalid",
         "file.not_utf8", "file.not_regular", "file.unreadable"]
HELLO = {"name": "python-example", "version": "0.1.0", "language": "python", "profiles": ["modules"],
         "capabilities": ["rule_modules", "nested_files", "restart", "fork", "compaction",
                          "cold_clear", "append_failure"],
         "codes": {c: c for c in CODES}}


def diag(code, path, line=None):
    return {"code": code, "path": path, **({"line": line} if line else {})}


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def within(path, root):
    return path == root or path.startswith(root.rstrip("/") + "/")


def present(path):
    """A priority name is present when a non-directory entry has it (a link to a dir is not)."""
    try:
        if stat.S_ISDIR(os.lstat(path).st_mode):
            return False
    except OSError:
        return False
    try:
        return not stat.S_ISDIR(os.stat(path).st_mode)
    except OSError:
        return True  # a dangling link or a loop: present, then refused as unreadable


def read_text(path, confine=None):
    """Reads an instruction file: realpath confinement (unless root file), the cap, one BOM, UTF-8."""
    if confine is not None:
        try:
            real = os.path.realpath(path, strict=True)
        except OSError:
            raise Refusal("file.unreadable")
        if not within(real, confine):
            raise Refusal(ESCAPE)
    try:
        st = os.stat(path)
    except OSError:
        raise Refusal("file.unreadable")
    if not stat.S_ISREG(st.st_mode) or os.path.realpath(path).startswith(("/proc/", "/sys/")):
        raise Refusal("file.not_regular")  # decided before opening: a FIFO, a device, procfs (D-CAP-4)
    if st.st_size > CAP:
        raise Refusal(OVERSIZED)  # decided on the size alone: nothing is read, nothing is cut
    try:
        with open(path, "rb") as f:
            data = f.read(CAP + 1)
    except OSError:
        raise Refusal("file.unreadable")
    if len(data) > CAP:
        raise Refusal(OVERSIZED)
    if data.startswith(BOM):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refusal("file.not_utf8")


# ---- the session: discovery, the trigger queue, the journal ----
class Session:
    def __init__(self, case):
        if case.get("profile") != "modules":
            raise ValueError(f"profile '{case.get('profile')}' is not supported")
        if case.get("platform") != "posix":
            raise ValueError(f"platform '{case.get('platform')}' is not implemented (no in-memory trees)")
        if case.get("placement"):
            raise ValueError("root placement is not implemented")
        self.given_root = case["root"].rstrip("/") or "/"
        self.root = os.path.realpath(self.given_root)
        self.state_dir = case["state_dir"]
        self.queue, self.fail_next, self.startup, self.active = [], False, [], {}
        os.makedirs(self.state_dir, exist_ok=True)
        if case.get("resume"):
            self.replay()

    # The journal: JSON Lines in state_dir. Nothing counts as loaded unless its append succeeded.
    def journal(self):
        return os.path.join(self.state_dir, "journal.jsonl")

    def append(self, record):
        with open(self.journal(), "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def replay(self):
        with open(self.journal(), encoding="utf-8") as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            try:
                rec = json.loads(line)
            except ValueError:
                if i >= len(lines) - 2:
                    break  # a torn last line: the append it belongs to never completed
                raise
            if rec["type"] == "startup":
                self.startup = rec["files"]
            elif rec["type"] == "instructions":
                self.active.update((m["path"], m["sha256"]) for m in rec["modules"])
            elif rec["type"] == "compact":
                self.active.clear()  # compaction drops every record appended before it (D-LIFE-3)

    def rules(self):
        """Walks .elowen/rules: [(relpath, globs or None, body)] in path order, and the refusals."""
        diags, mods = [], []
        for rel in (".elowen", ".elowen/rules"):
            p = os.path.join(self.root, rel)
            try:
                st = os.lstat(p)
            except OSError:
                return [], []
            if stat.S_ISLNK(st.st_mode):  # must be a real directory (D-LINK-3)
                if self.leaves_root(p):
                    diags.append(diag(ESCAPE, rel))
                return [], diags
            if not stat.S_ISDIR(st.st_mode):
                return [], []
        stack = [".elowen/rules"]
        while stack:
            rel = stack.pop()
            try:
                entries = list(os.scandir(os.path.join(self.root, rel)))
            except OSError:
                continue
            for e in entries:
                r = rel + "/" + e.name
                if e.is_symlink():
                    try:
                        real = os.path.realpath(e.path, strict=True)
                    except OSError:
                        if e.name.endswith(".md"):
                            diags.append(diag("file.unreadable", r))
                        continue
                    if not within(real, self.root):
                        diags.append(diag(ESCAPE, r))  # whatever its name (D-LINK-1)
                        continue
                    if os.path.isdir(real):
                        continue  # in-project directory links stay unwalked (D-LINK-2)
                elif e.is_dir(follow_symlinks=False):
                    stack.append(r)
                    continue
                if e.name.endswith(".md"):
                    try:
                        globs, body = parse_module(read_text(e.path, self.root))
                        mods.append((r, globs, body))
                    except Refusal as x:
                        diags.append(diag(x.code, r, x.line))
        mods.sort(key=lambda m: m[0].encode("utf-8", "surrogateescape"))
        return mods, diags

    def leaves_root(self, p):
        try:
            return not within(os.path.realpath(p, strict=True), self.root)
        except OSError:
            return False

    def folder_file(self, folder, confine):
        """The folder's instruction file by name priority: (relpath, text or Refusal), or None."""
        for name in NAMES:
            path = os.path.join(self.root, folder, name)
            if present(path):  # the first present name wins, even when refused (D-NEST-2)
                try:
                    text = read_text(path, self.root if confine else None)
                except Refusal as x:
                    text = x
                return posixpath.join(folder, name), text
        return None

    def place(self, p):
        """A touched path -> its root-relative /-form, or None outside the root (lexical, D-LINK-6)."""
        full = posixpath.normpath(p if p.startswith("/") else self.given_root + "/" + p)
        for base in (self.given_root, self.root):
            if full.startswith(base.rstrip("/") + "/"):
                return full[len(base.rstrip("/")) + 1:]
        return None

    def start(self):
        diags, files = [], []
        found = self.folder_file("", confine=False)  # the root file follows links anywhere
        if found and isinstance(found[1], Refusal):
            diags.append(diag(found[1].code, found[0]))
        elif found:
            files.append({"path": found[0], "kind": "root", "content": found[1]})
        mods, rule_diags = self.rules()
        files += [{"path": r, "kind": "module", "content": body} for r, g, body in mods if g is None]
        for f in files:
            f["sha256"] = sha(f["content"])
        self.append({"type": "startup", "files": files})
        self.startup = files
        return {"startup": files, "diagnostics": diags + rule_diags}

    def touch(self, step):
        if step.get("file_access") is not None:  # only details.fileAccess triggers, never the tool
            rel = self.place(step["file_access"])
            if rel and rel not in self.queue:
                self.queue.append(rel)
        return {"diagnostics": []}

    def next_request(self):
        if not self.queue:
            return {"diagnostics": []}  # an empty queue runs no discovery (D-TRIG-3)
        batch, self.queue = self.queue, []
        mods, diags = self.rules()
        folders = set()
        for rel in batch:
            segs = rel.split("/")[:-1]
            if segs and segs[0] != ".elowen":  # nested discovery does not enter .elowen
                folders.update("/".join(segs[:i]) for i in range(1, len(segs) + 1))
        found = []  # nested files shallow to deep, then by path (D-ORDER-1)
        for folder in sorted(folders, key=lambda f: (f.count("/"), f.encode("utf-8", "surrogateescape"))):
            hit = self.folder_file(folder, confine=True)
            if hit and isinstance(hit[1], Refusal):
                diags.append(diag(hit[1].code, hit[0]))
            elif hit:
                found.append(hit)
        found += [(r, body) for r, globs, body in mods
                  if globs and any(g.fullmatch(t) for g in globs for t in batch)]
        modules = [{"path": r, "sha256": sha(c), "content": c, "supersedes": r in self.active}
                   for r, c in found if self.active.get(r) != sha(c)]  # dedupe on (path, sha256)
        if not modules:
            return {"diagnostics": diags}  # an empty or diagnostic resolution appends nothing
        if self.fail_next:
            self.fail_next = False
            self.queue = batch  # the touched paths go back into the queue (D-LIFE-4)
            return {"diagnostics": diags + [diag(FAILED, "")]}
        self.append({"type": "instructions", "modules": [
            {k: m[k] for k in ("path", "sha256", "supersedes")} for m in modules]})
        self.active.update((m["path"], m["sha256"]) for m in modules)
        return {"activation": {"modules": modules, "rendered": "\n".join(map(self.render, modules))},
                "diagnostics": diags}

    def render(self, m):
        path = (self.root.rstrip("/") + "/" + m["path"]).replace("&", "&amp;").replace(
            "<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
        sup = ' supersedes="earlier version"' if m["supersedes"] else ""
        c = m["content"]
        return f'<instruction_module path="{path}"{sup}>\n{c}{"" if c.endswith(chr(10)) else chr(10)}' \
               "</instruction_module>"

    def step(self, step):
        op = step["op"]
        if op == "start":
            return self.start()
        if op == "touch":
            return self.touch(step)
        if op == "next_request":
            return self.next_request()
        if op == "compact":
            self.append({"type": "compact"})
            self.active.clear()
        elif op == "fail_next_append":
            self.fail_next = True
        elif op == "fork":  # the fork gets the parent's journal (so its loaded modules), not its queue
            os.makedirs(step["state_dir"], exist_ok=True)
            if os.path.exists(self.journal()):
                shutil.copyfile(self.journal(), os.path.join(step["state_dir"], "journal.jsonl"))
            self.state_dir, self.queue = step["state_dir"], []
            return {"startup": self.startup, "diagnostics": []}  # a fork retains its parent's prefix
        elif op != "cold_clear":  # cold clearing never strips instruction records
            raise ValueError(f"step '{op}' is not supported")
        return {"diagnostics": []}


def persistent():
    session = None
    for raw in sys.stdin.buffer:
        seq = None
        try:
            req = json.loads(raw)
            seq = req["seq"]
            reply = {"seq": seq, "ok": True}
            kind = req["type"]
            if kind == "hello":
                if req.get("protocol") != "2":
                    raise ValueError(f"protocol {req.get('protocol')!r} is not spoken (only '2')")
                reply["hello"] = HELLO
            elif kind == "open":
                session = None  # any case still open is dropped
                session = Session(req["open"])
                reply["observation"] = ({"startup": session.startup, "diagnostics": []}
                                        if req["open"].get("resume") else {"diagnostics": []})
            elif kind == "step":
                if session is None:
                    raise ValueError("no case is open")
                reply["observation"] = session.step(req["step"])
            elif kind == "close":
                session = None
            else:
                raise ValueError(f"unknown request type {kind!r}")
        except Exception as e:  # one reply per request, always
            print(f"python-example: {type(e).__name__}: {e}", file=sys.stderr)
            reply = {"seq": seq, "ok": False, "error": f"{type(e).__name__}: {e}"}
        sys.stdout.buffer.write(json.dumps(reply).encode() + b"\n")
        sys.stdout.buffer.flush()


def one_shot():
    case = json.loads(sys.stdin.buffer.read())
    observations, out = [], {}
    try:
        session = Session(case["open"])
        for i, step in enumerate(case["steps"], 1):
            try:
                if step["op"] == "restart":  # drop the session, resume it from its state dir
                    session = Session({**case["open"], "state_dir": session.state_dir, "resume": True})
                    observations.append({"startup": session.startup, "diagnostics": []})
                else:
                    observations.append(session.step(step))
            except Exception as e:
                raise ValueError(f"step {i}: {type(e).__name__}: {e}")
    except Exception as e:
        out["error"] = str(e)
    sys.stdout.write(json.dumps({"observations": observations, **out}) + "\n")


if __name__ == "__main__":
    one_shot() if "--one-shot" in sys.argv[1:] else persistent()
