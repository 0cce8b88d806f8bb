#!/usr/bin/env node
// Adapter (protocol 2, persistent mode) for loadProjectContextFiles({cwd, agentDir}) of
// @mariozechner/pi-coding-agent 0.73.1 (dist/core/resource-loader.js:48-76), the loader behind
// pi's "# Project Context" section of the system prompt (dist/core/system-prompt.js:104-110).
//
// It walks from cwd up to "/", taking in each folder the first of AGENTS.md, AGENTS.MD, CLAUDE.md,
// CLAUDE.MD that exists, once, when the session is created. That fits two profiles, and both are
// declared, with no optional capability but `restart`:
//
//   modules (seed 000)  the root file: cwd is the root; start reports the files it returns.
//   section (seed 002)  the walk-up: cwd is the case's cwd; every round reports the section pi
//                       wrote into its system prompt at session start (rewritten on the first round
//                       only: pi never re-reads it).
//
// restart: a resumed pi session creates a new resource loader and loads the files again
// (DefaultResourceLoader.reload, resource-loader.js:322-326); nothing else survives.
// Nothing global is read: agentDir is a directory that does not exist. The walk above the root
// is pi's own and cannot be switched off (see README.md).
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import util from 'node:util';
import { createHash } from 'node:crypto';

for (const k of ['log', 'info', 'debug', 'warn', 'error']) { // stdout belongs to the protocol
  console[k] = (...args) => process.stderr.write(`${util.format(...args)}\n`);
}
const dist = new URL('./node_modules/@mariozechner/pi-coding-agent/dist/', import.meta.url);
const { loadProjectContextFiles } = await import(new URL('core/resource-loader.js', dist));
const { buildSystemPrompt } = await import(new URL('core/system-prompt.js', dist));
const { version } = JSON.parse(fs.readFileSync(new URL('../package.json', dist)));

const HELLO = {
  name: 'pi-coding-agent', version, language: 'typescript', profiles: ['modules', 'section'],
  capabilities: ['restart'],
};
const sha = (s) => createHash('sha256').update(s, 'utf8').digest('hex');

/**
 * The cwd pi has when started in `dir`: main.js:375 takes `process.cwd()`, and the session runs
 * in it (SessionManager.create(cwd), main.js:217, and createAgentSessionRuntime's cwd,
 * main.js:477). process.cwd() is getcwd(3), the physical directory with every link resolved, not
 * the path the shell was given: a cwd reached through a link is walked up from its real folder.
 * The adapter goes there and back, so it holds no case folder as its own cwd between requests.
 */
function physicalCwd(dir) {
  const home = process.cwd();
  process.chdir(dir);
  try {
    return process.cwd();
  } finally {
    process.chdir(home);
  }
}

/** The "# Project Context" part of the system prompt pi builds from these files. */
function projectContext(cwd, contextFiles) {
  const mark = '\u0000CUSTOM-PROMPT\u0000';
  const prompt = buildSystemPrompt({ cwd, contextFiles, customPrompt: mark, selectedTools: [] });
  return prompt.slice(mark.length, prompt.lastIndexOf('\nCurrent date: ')).replace(/^\n\n/, '');
}

class Session {
  constructor(open) {
    if (!['modules', 'section'].includes(open.profile)) throw new Error(`profile '${open.profile}' is not supported`);
    if (open.platform !== 'posix') throw new Error(`platform '${open.platform}' is not implemented`);
    if (open.placement) throw new Error('root placement is not implemented');
    const unsupported = Object.keys(open.options ?? {}).filter((k) => k !== 'cwd');
    if (unsupported.length) throw new Error(`options not supported: ${unsupported.join(', ')}`);
    this.profile = open.profile;
    this.root = open.root;
    this.cwd = physicalCwd(open.options?.cwd ?? open.root);
    this.agentDir = path.join(open.state_dir, 'no-agent-dir'); // never created: no global file
    fs.mkdirSync(open.state_dir, { recursive: true });
    this.files = null;
    this.written = false;
  }

  load() { // what createAgentSession does once: the files, fixed for the session's life
    this.files = loadProjectContextFiles({ cwd: this.cwd, agentDir: this.agentDir });
    const rel = (p) => path.relative(this.root, p);
    if (this.profile === 'modules') {
      const startup = this.files.map((f) => ({ path: rel(f.path), kind: 'root', sha256: sha(f.content), content: f.content }));
      return { startup, diagnostics: [] };
    }
    this.text = this.files.length ? projectContext(this.cwd, this.files) : '';
    this.paths = this.files.map((f) => rel(f.path));
    return { diagnostics: [] };
  }

  step(step) {
    switch (step.op) {
      case 'start':
        return this.load();
      case 'touch':
        return { diagnostics: [] }; // pi loads nothing on a tool call
      case 'next_request': {
        if (this.profile === 'modules') return { diagnostics: [] };
        const rewritten = !this.written && this.text !== '';
        this.written ||= rewritten;
        return { section: { text: this.text, rewritten, files: this.paths, omitted: [] }, diagnostics: [] };
      }
      default:
        throw new Error(`step '${step.op}' is not supported`);
    }
  }
}

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
      reply.observation = req.open.resume ? session.load() : { diagnostics: [] }; // a resumed session reloads
    } else if (req.type === 'step') {
      if (!session) throw new Error('no case is open');
      reply.observation = session.step(req.step);
    } else if (req.type === 'close') {
      session = null;
    } else {
      throw new Error(`unknown request type '${req.type}'`);
    }
  } catch (e) {
    process.stderr.write(`pi adapter: ${e.stack}\n`);
    reply = { seq, ok: false, error: String(e.message ?? e) };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
