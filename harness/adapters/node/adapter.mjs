#!/usr/bin/env node
// Example adapter (protocol 2): the ROOT-FILE profile of seed 003 (ADR 0036), written from the
// seed and spec-cases/DECISIONS.md alone. Node 20, no dependencies.
//
//   node adapter.mjs              persistent mode: one JSON request per stdin line, one reply per line
//   node adapter.mjs --one-shot   one-shot mode: the whole case on stdin, {"observations":[...]} out
//
// What it does, in the seed's words: "returns the root's AGENTS.md, or agents.md when there is no
// AGENTS.md, and "" when there is neither"; "read only as a regular file inside the root after
// links are followed, and only if the credential denylist passes it under both its name and its
// target's"; "redacted like a tool result, and capped at 32 KiB, cut at a line, with a line that
// says the file goes on and that fs-read reads the rest"; "read once, when the session starts".
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';

const CAP = 32 * 1024; // D-RF-CUT-1
const NAMES = ['AGENTS.md', 'agents.md'];
const HEADING = "# Maintainers' instructions\n\nThese are the instructions of this repository's " +
  "maintainers, from its root AGENTS.md. Follow them where they apply; where they and the " +
  'request differ, follow the request.\n\n'; // D-RF-RENDER-1
const CODES = ['file.not_utf8', 'file.not_regular', 'file.unreadable', 'rootfile.denied'];
const HELLO = {
  name: 'node-root-file-example', version: '0.1.0', language: 'javascript',
  profiles: ['root-file'], capabilities: ['restart'],
  codes: Object.fromEntries(CODES.map((c) => [c, c])),
};

// The credential denylist (D-RF-DENY-1): file-name globs, and folder names at any depth.
const DENY_NAMES = ['.env', '.env.*', '*.env', '*.pem', '*.key', '*.p12', '*.pfx', '*.jks', '*.kdbx',
  '*.keystore', 'id_rsa', 'id_rsa.*', 'id_dsa*', 'id_ecdsa*', 'id_ed25519*', '.netrc', '.npmrc',
  '.pypirc', '.git-credentials', 'credentials', 'credentials.*', '.htpasswd', '*.tfvars']
  .map((g) => new RegExp(`^${g.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*')}$`, 'is'));
const DENY_FOLDERS = new Set(['.ssh', '.aws', '.gnupg', '.docker', '.kube']);
const denied = (rel) => {
  const segs = rel.split('/');
  return DENY_NAMES.some((re) => re.test(segs.at(-1))) ||
    segs.slice(0, -1).some((s) => DENY_FOLDERS.has(s.toLowerCase()));
};

// Redaction "like a tool result" (D-RF-REDACT-1, -3), applied to the kept text only. The NAME of a
// NAME=value line is matched whatever its case (D-RF-REDACT-3), and its value is the rest of the line
// (D-RF-REDACT-4).
const redact = (text) => text
  .replace(/-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:[\s\S]*?-----END [A-Z0-9 ]*PRIVATE KEY-----|[\s\S]*$)/g,
    (m) => (m.includes('-----END ') ? '[REDACTED PRIVATE KEY]' : '[REDACTED PRIVATE KEY]\n'))
  .replace(/\bAKIA[A-Z0-9]{16}\b/g, '[REDACTED]')
  .replace(/\bgh[pousr]_[A-Za-z0-9]{36,}\b/g, '[REDACTED]')
  .replace(/\bsk-[A-Za-z0-9_-]{20,}/g, '[REDACTED]')
  .replace(/\bxox[abprs]-[A-Za-z0-9-]{10,}/g, '[REDACTED]')
  .replace(/^([ \t]*(?:export[ \t]+)?[A-Za-z0-9_]*(?:PASSWORD|SECRET|TOKEN|API_KEY)[A-Za-z0-9_]*[ \t]*=[ \t]*)[^\r\n]+/gim,
    '$1[REDACTED]');

class Refusal extends Error {}
const within = (p, root) => p === root || p.startsWith(root.endsWith('/') ? root : `${root}/`);

/** Reads the found file: confinement after links, the denylist, the cut, UTF-8, redaction. */
function readRootFile(root, name) {
  let real;
  try { real = fs.realpathSync(path.join(root, name)); } catch { throw new Refusal('file.unreadable'); }
  if (!within(real, root)) throw new Refusal('brain.instruction_module_escape'); // D-RF-READ-1
  if (denied(name) || denied(path.relative(root, real))) throw new Refusal('rootfile.denied');
  if (!fs.statSync(real).isFile()) throw new Refusal('file.not_regular'); // never opened: no blocking
  const fd = fs.openSync(real, 'r');
  const buf = Buffer.alloc(CAP + 1);
  let n = 0;
  try {
    for (let r; n < buf.length && (r = fs.readSync(fd, buf, n, buf.length - n, null)) > 0;) n += r;
  } finally { fs.closeSync(fd); }
  let kept = buf.subarray(0, n);
  const cut = n > CAP; // never more than 32,769 bytes are read
  if (cut) kept = kept.subarray(0, kept.subarray(0, CAP).lastIndexOf(0x0a) + 1); // after the last newline
  if (kept[0] === 0xef && kept[1] === 0xbb && kept[2] === 0xbf) kept = kept.subarray(3); // BOM after the cut
  let text;
  try { text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(kept); } catch {
    throw new Refusal('file.not_utf8');
  }
  text = redact(text);
  return cut ? `${text}[${name} goes on beyond 32 KiB; read the rest with fs-read]\n` : text;
}

class Session {
  constructor(open) {
    if (open.profile !== 'root-file') throw new Error(`profile '${open.profile}' is not supported`);
    if (open.platform !== 'posix') throw new Error(`platform '${open.platform}' is not implemented`);
    this.root = fs.realpathSync(open.root);
    this.stateFile = path.join(open.state_dir, 'root-file.json');
    fs.mkdirSync(open.state_dir, { recursive: true });
    this.state = open.resume ? JSON.parse(fs.readFileSync(this.stateFile, 'utf8')) : null;
    this.prompt = open.prompt; // 'full', or absent (the example has no lean prompt)
  }

  // The example's one full system prompt, as its parts in order: the section after the working
  // rules, the git rule and the workspace's folders, before the project notes (seed 003), and
  // absent when its text is empty. Reported only when the case asks for it.
  withPrompts(observation) {
    if (this.prompt !== 'full') return observation;
    const section = this.state.text !== '' ? ['project_instructions'] : [];
    const parts = ['working_rules', 'git_rule', 'workspace_folders', ...section, 'project_notes'];
    return { ...observation, prompts: [{ kind: 'full', parts }] };
  }

  start() {
    const diagnostics = [];
    const startup = [];
    const entries = new Set(fs.readdirSync(this.root)); // names as the filesystem stores them
    const name = NAMES.find((n) => entries.has(n) && !isDir(path.join(this.root, n)));
    if (name) {
      try {
        const content = readRootFile(this.root, name);
        startup.push({ path: name, kind: 'root', sha256: sha(content), content });
      } catch (e) {
        if (!(e instanceof Refusal)) throw e;
        diagnostics.push({ code: e.message, path: name }); // a refused AGENTS.md never falls back
      }
    }
    const content = startup[0]?.content ?? '';
    const text = content.trim() === '' ? '' : HEADING + content; // D-RF-RENDER-2
    this.state = { startup, text, files: startup.map((f) => f.path) };
    fs.writeFileSync(this.stateFile, JSON.stringify(this.state)); // "read once": kept for a restart
    return this.withPrompts({ startup, section: this.section(text !== ''), diagnostics });
  }

  section(rewritten) {
    return { text: this.state.text, rewritten, files: this.state.files, omitted: [] };
  }

  resumed() {
    return this.withPrompts({ startup: this.state.startup, section: this.section(this.state.text !== ''), diagnostics: [] });
  }

  step(step) {
    if (step.op === 'start') return this.start();
    if (step.op === 'touch' || step.op === 'next_request') return { diagnostics: [] }; // changes nothing
    throw new Error(`step '${step.op}' is not supported by the root-file profile`);
  }
}

const sha = (s) => createHash('sha256').update(s, 'utf8').digest('hex');
function isDir(p) {
  try { return fs.statSync(p).isDirectory(); } catch { return false; } // dangling: present, unreadable
}

async function persistent() {
  let session = null;
  for await (const line of readline.createInterface({ input: process.stdin, crlfDelay: Infinity })) {
    let reply;
    let seq = null;
    try {
      const req = JSON.parse(line);
      seq = req.seq;
      reply = { seq, ok: true };
      if (req.type === 'hello') {
        if (req.protocol !== '2') throw new Error(`protocol '${req.protocol}' is not spoken (only '2')`);
        reply.hello = HELLO;
      } else if (req.type === 'open') {
        session = null;
        session = new Session(req.open);
        reply.observation = req.open.resume ? session.resumed() : { diagnostics: [] };
      } else if (req.type === 'step') {
        if (!session) throw new Error('no case is open');
        reply.observation = session.step(req.step);
      } else if (req.type === 'close') {
        session = null;
      } else {
        throw new Error(`unknown request type '${req.type}'`);
      }
    } catch (e) {
      process.stderr.write(`node-root-file-example: ${e.stack}\n`);
      reply = { seq, ok: false, error: String(e.message ?? e) };
    }
    process.stdout.write(`${JSON.stringify(reply)}\n`);
  }
}

function oneShot() {
  const input = JSON.parse(fs.readFileSync(0, 'utf8'));
  const observations = [];
  const out = { observations };
  try {
    let session = new Session(input.open);
    input.steps.forEach((step, i) => {
      try {
        if (step.op === 'restart') { // drop the session and resume it from the state directory
          session = new Session({ ...input.open, resume: true });
          observations.push(session.resumed());
        } else {
          observations.push(session.step(step));
        }
      } catch (e) { throw new Error(`step ${i + 1}: ${e.message}`); }
    });
  } catch (e) { out.error = e.message; }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

if (process.argv.includes('--one-shot')) oneShot(); else await persistent();
