#!/usr/bin/env node
// Adapter (protocol 2, persistent mode) for the instruction loader of @google/gemini-cli-core 0.61.0,
// run against the MODULES profile (seed 000) and the SECTION profile (seed 002). It drives the
// package's own code, unchanged. Modules:
//
//   start         MemoryContextManager.refresh()  (context/memoryContextManager.js:21), the startup
//                 memory discovery Config.initialize() runs (config/config.js:871-872); the startup
//                 prefix is its project memory, getEnvironmentMemory(), split per file.
//   touch         discoverJitContext(config, path)  (tools/jit-context.js:16), what read_file,
//                 write_file, replace and list_directory call after they succeed, which calls
//                 loadJitSubdirectoryMemory (utils/memoryDiscovery.js:341), with the path each
//                 tool hands it: the real path for read_file, write_file and replace, the lexical
//                 one for list_directory; a read of a folder and a listing of a file fail first.
//   next_request  the JIT text those tool results carried to the model, as one activation.
//   compact       nothing: chat compression never resets the loader (core/client.js:817-840).
//   restart       a new session (`gemini --resume`): Config.initialize() builds a new
//                 MemoryContextManager and refreshes it from disk; no loader state survives.
//
// Section: the same startup discovery is seed 002's walk (utils/memoryDiscovery.js:276-289: up from
// the working directory to the first folder holding a memoryBoundaryMarkers entry, '.git' by
// default, then every folder from there down to it), and its text reaches the model once, in the
// session's first message: Config.getSessionMemory() (config/config.js:1660-1679), placed by
// getEnvironmentContext (utils/environmentContext.js:50-58). Every next_request reports that text,
// rewritten on the first round only, since gemini never rewrites it. Its two options are the
// section's: memoryBoundaryMarkers is projectRootMarkers and context.fileName is fileNames.
// Files gemini finds below the working directory on a tool call go into that tool's result (the
// JIT above), never into this text, so subtrees are not declared.
//
// The context file name is set to AGENTS.md the way Config does it (config/config.js:753-755:
// setGeminiMdFilename, which adds the name in front of the default GEMINI.md). Nothing global is
// read: GEMINI_CLI_HOME points at a directory that does not exist, and there are no extensions and
// no user project memory. memoryBoundaryMarkers keeps Config's default ['.git']
// (config/config.js:579), so the loader probes the folders above the root for a .git and, when
// one has it, walks up to it (utils/memoryDiscovery.js:102-149, 280-285, 362-363), as gemini does.
// Observations report what the loader sends, as it sends it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import util from 'node:util';
import { createHash } from 'node:crypto';

// The package logs through console.debug/console.log, which write to stdout: stdout belongs to
// the protocol, so every console method goes to stderr before the package is loaded (the
// loader's many [DEBUG] lines only with GEMINI_ADAPTER_DEBUG=1, to keep the stderr tail useful).
for (const k of ['log', 'info', 'debug', 'warn', 'error']) {
  const quiet = k === 'debug' && process.env.GEMINI_ADAPTER_DEBUG !== '1';
  console[k] = quiet ? () => {} : (...args) => process.stderr.write(`${util.format(...args)}\n`);
}
const pkg = '@google/gemini-cli-core/dist/src';
const { MemoryContextManager } = await import(`${pkg}/context/memoryContextManager.js`);
const { discoverJitContext, JIT_CONTEXT_PREFIX, JIT_CONTEXT_SUFFIX } = await import(`${pkg}/tools/jit-context.js`);
const { setGeminiMdFilename, resetGeminiMdFilename } = await import(`${pkg}/tools/memoryTool.js`);
const { readGeminiMdFiles } = await import(`${pkg}/utils/memoryDiscovery.js`);
const { resolveDefensiveToolPath, resolveToRealPath } = await import(`${pkg}/utils/paths.js`);
const { correctPath } = await import(`${pkg}/utils/pathCorrector.js`);
const { FileDiscoveryService } = await import(`${pkg}/services/fileDiscoveryService.js`);
const { DEFAULT_FILE_FILTERING_OPTIONS } = await import(`${pkg}/config/constants.js`);
const { version } = JSON.parse(fs.readFileSync(new URL('./node_modules/@google/gemini-cli-core/package.json', import.meta.url)));

// setGeminiMdFilename resolves the *name* against the process's cwd (tools/memoryTool.js:27, via
// resolveToRealPath), the harness's cwd here: move to the harness's empty HOME first, so that this
// probe, too, stays out of every directory the case did not name.
process.chdir(os.homedir());
const HOME = process.cwd();

// Config.getSessionMemory, for the section text; config.js is loaded only for a section case,
// since loading it takes seconds.
let sessionMemoryOf = null;
async function sessionMemory(manager) {
  if (!sessionMemoryOf) {
    const { Config } = await import(`${pkg}/config/config.js`);
    sessionMemoryOf = (m) => Config.prototype.getSessionMemory.call({ memoryContextManager: m });
  }
  return sessionMemoryOf(manager);
}

const HELLO = {
  name: 'gemini-cli-core', version, language: 'typescript', profiles: ['modules', 'section'],
  // No rule_modules (it has no .elowen/rules), no fork, no cold clearing, no journal to fail; of
  // the section's options, only the root markers and the file names (see the header).
  capabilities: ['nested_files', 'compaction', 'restart', 'root_markers', 'file_names'],
};
const SECTION_OPTIONS = new Set(['cwd', 'project_root_markers', 'file_names']);
// The gemini tools that call discoverJitContext after a successful run, by the suite's tool names.
const JIT_TOOLS = {
  read: 'read_file', read_file: 'read_file', write: 'write_file', write_file: 'write_file',
  edit: 'replace', replace: 'replace', list: 'list_directory', ls: 'list_directory',
  list_directory: 'list_directory',
};
const isDirectory = (p) => { try { return fs.statSync(p).isDirectory(); } catch { return false; } };

const sha = (s) => createHash('sha256').update(s, 'utf8').digest('hex');

// GEMINI_ADAPTER_UNTRIMMED=1 is a debugging aid, not what the loader sends: it reports each file
// as readGeminiMdFiles read it, before concatenateInstructions trims it, so that the suite can show
// what else differs in cases whose only first difference is the trim. Never use it for the gate.
const UNTRIMMED = process.env.GEMINI_ADAPTER_UNTRIMMED === '1';

/** concatenateInstructions' blocks (utils/memoryDiscovery.js:202-215) -> [{path, content}]. */
async function split(text, root) {
  const out = [];
  const re = /--- Context from: (.+?) ---\n([\s\S]*?)\n--- End of Context from: \1 ---/g;
  for (const m of text.matchAll(re)) {
    const content = UNTRIMMED ? (await readGeminiMdFiles([m[1]], 'tree', []))[0].content : m[2];
    out.push({ path: path.relative(root, m[1]), content });
  }
  return out;
}

/** findProjectRoot's answer (utils/memoryDiscovery.js:102-120), or `dir` when it finds none. */
function markedRoot(dir, markers) {
  const usable = markers.filter((m) => !path.isAbsolute(m) && !m.includes('..'));
  if (usable.length === 0) return dir;
  for (let d = dir; ; d = path.dirname(d)) {
    if (usable.some((m) => { try { fs.accessSync(path.join(d, m)); return true; } catch { return false; } })) return d;
    if (path.dirname(d) === d) return dir;
  }
}

/**
 * The directory gemini works in when started in `dir`: its target directory, the workspace's one
 * directory, is the CLI's process.cwd() (Config keeps it, config/config.js:430, and its cwd
 * defaults to process.cwd(), :515), which is getcwd: the physical directory, every link resolved.
 */
function physicalCwd(dir) {
  process.chdir(dir);
  try {
    return process.cwd();
  } finally {
    process.chdir(HOME);
  }
}

class Session {
  constructor(open) {
    if (!['modules', 'section'].includes(open.profile)) throw new Error(`profile '${open.profile}' is not supported`);
    if (open.platform !== 'posix') throw new Error(`platform '${open.platform}' is not implemented`);
    if (open.placement) throw new Error('root placement is not implemented');
    const options = open.options ?? {};
    const unsupported = Object.keys(options).filter((k) => !SECTION_OPTIONS.has(k));
    if (unsupported.length) throw new Error(`options not supported: ${unsupported.join(', ')}`);
    this.profile = open.profile;
    this.root = open.root;
    this.pending = []; // JIT texts of the tool results since the last model request
    this.text = ''; // section: the text of the session's first message, and its files
    this.files = [];
    this.written = false; // section: whether a round has carried the text
    fs.mkdirSync(open.state_dir, { recursive: true });
    process.env.GEMINI_CLI_HOME = path.join(open.state_dir, 'no-gemini-home'); // never created
    // A fresh process's file names: the default GEMINI.md, then context.fileName in front of it
    // (config/config.js:753-755, tools/memoryTool.js:18-43): "AGENTS.md" unless the case sets names.
    resetGeminiMdFilename();
    setGeminiMdFilename(options.file_names ?? 'AGENTS.md');
    // memoryBoundaryMarkers: Config's default ['.git'] (config/config.js:579) unless the case sets
    // projectRootMarkers.
    const markers = options.project_root_markers ?? ['.git'];
    // Where gemini was started: the root (modules), or the case's cwd, physically (section).
    const workDir = open.profile === 'section' ? physicalCwd(options.cwd ?? open.root) : this.root;
    // Section files are named relative to the root gemini's walk stops at (its "project root"):
    // the first folder at or above workDir holding a marker, else workDir itself
    // (utils/memoryDiscovery.js:102-120, 280-281: `ceiling = gitRoot ?? resolvedRoot`). The
    // function is not exported, so its walk is repeated here: fs.access of each marker, upward.
    this.base = open.profile === 'section' ? markedRoot(workDir, markers) : this.root;
    this.config = {
      isTrustedFolder: () => true,
      getWorkspaceContext: () => ({ getDirectories: () => [workDir] }),
      getMemoryBoundaryMarkers: () => markers,
      getTargetDir: () => workDir, // the tools resolve against it
      getFileService: () => this.fileService,
      getFileFilteringOptions: () => DEFAULT_FILE_FILTERING_OPTIONS,
      getExtensionLoader: () => ({ getExtensions: () => [] }),
      storage: { getProjectMemoryDir: () => path.join(open.state_dir, 'no-project-memory') },
      getImportFormat: () => 'tree',
      getMcpClientManager: () => undefined,
      getMemoryContextManager: () => this.manager,
    };
    this.fileService = new FileDiscoveryService(workDir, DEFAULT_FILE_FILTERING_OPTIONS);
    this.manager = new MemoryContextManager(this.config);
  }

  /**
   * The path a gemini tool hands discoverJitContext for this call, or null when the tool does not
   * reach that call. The path is the model's argument (`step.path`) resolved as the tool resolves
   * it, with the package's own helpers; what the suite cannot say (the file's content, an
   * approval) is taken from `outcome: ok`, but where what stands on disk decides that the tool
   * fails before the JIT, the adapter follows the tool, since gemini cannot report that call ok.
   */
  jitTarget(step) {
    const tool = step.outcome === 'ok' ? JIT_TOOLS[step.tool] : undefined; // the name decides, not fileAccess
    if (!tool) return null;
    const root = this.root;
    if (tool === 'list_directory') {
      // ls.js:76: the folder is placed lexically, path.resolve(targetDir, dir_path), and a path that
      // is no folder is an error result (ls.js:89-97) returned before the JIT call (ls.js:164).
      const dir = path.resolve(root, step.path);
      return isDirectory(dir) ? dir : null;
    }
    let target;
    if (tool === 'replace' && !path.isAbsolute(step.path)) {
      // edit.js:297-315: a relative path is corrected first (utils/pathCorrector.js:10-44: the
      // direct path if it exists, else the one file of that name the workspace search finds),
      // then resolved to its real path; failing both, as read_file does.
      const corrected = correctPath(step.path, this.config);
      if (corrected.success) target = this.realPath(corrected.correctedPath);
    }
    // read-file.js:27-33, write-file.js:150-156, edit.js:316-324: resolveDefensiveToolPath (NUL
    // bytes and a leading @), path.resolve against the target dir, then resolveToRealPath
    // (utils/paths.js:372-386: every link resolved, a missing tail kept as written); the lexical
    // path only if that throws. This real path is what discoverJitContext gets (read-file.js:99,
    // write-file.js:305, edit.js:728).
    target ??= this.realPath(path.resolve(root, resolveDefensiveToolPath(step.path, root)));
    // read_file of a folder: processSingleFileContent answers TARGET_IS_DIRECTORY
    // (utils/fileUtils.js:405-413) and execute returns that error (read-file.js:64-73) before the
    // JIT call at read-file.js:99, so a read of a folder loads nothing.
    if (tool === 'read_file' && isDirectory(target)) return null;
    return target;
  }

  realPath(p) {
    try { return resolveToRealPath(p); } catch { return p; }
  }

  async start() {
    await this.manager.refresh();
    const outside = [this.manager.getGlobalMemory(), this.manager.getExtensionMemory(),
      this.manager.getUserProjectMemory()].filter(Boolean);
    if (outside.length) throw new Error('global memory was loaded: the environment is not isolated');
    const files = await split(this.manager.getEnvironmentMemory(), this.base);
    if (this.profile === 'section') {
      // getSessionMemory's text starts with the newline that parts it from the directory context
      // in getEnvironmentContext (utils/environmentContext.js:53-58): not the section's own.
      this.text = (await sessionMemory(this.manager)).replace(/^\n/, '');
      this.files = files.map((f) => f.path);
      return { diagnostics: [] };
    }
    const startup = files.map((f) => ({ path: f.path, kind: 'root', sha256: sha(f.content), content: f.content }));
    return { startup, diagnostics: [] };
  }

  /** The section round: the session's first message, written once. */
  section() {
    const rewritten = !this.written && this.text !== '';
    this.written ||= rewritten;
    return { section: { text: this.text, rewritten, files: this.files, omitted: [] }, diagnostics: [] };
  }

  async step(step) {
    switch (step.op) {
      case 'start':
        return this.start();
      case 'touch': {
        const target = this.jitTarget(step);
        const jit = target === null ? '' : await discoverJitContext(this.config, target);
        if (jit) this.pending.push(jit);
        return { diagnostics: [] };
      }
      case 'next_request': {
        if (this.profile === 'section') return this.section();
        if (!this.pending.length) return { diagnostics: [] };
        const texts = this.pending.splice(0);
        const modules = (await split(texts.join('\n'), this.root))
          .map((f) => ({ path: f.path, sha256: sha(f.content), content: f.content, supersedes: false }));
        const rendered = texts.map((t) => `${JIT_CONTEXT_PREFIX}${t}${JIT_CONTEXT_SUFFIX}`).join('');
        return { activation: { modules, rendered }, diagnostics: [] };
      }
      case 'compact':
        return { diagnostics: [] };
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
      // A resumed session re-runs the startup discovery from disk (there is nothing to restore).
      reply.observation = req.open.resume ? await session.start() : { diagnostics: [] };
    } else if (req.type === 'step') {
      if (!session) throw new Error('no case is open');
      reply.observation = await session.step(req.step);
    } else if (req.type === 'close') {
      session = null;
    } else {
      throw new Error(`unknown request type '${req.type}'`);
    }
  } catch (e) {
    process.stderr.write(`gemini-cli-core adapter: ${e.stack}\n`);
    reply = { seq, ok: false, error: String(e.message ?? e) };
  }
  process.stdout.write(`${JSON.stringify(reply)}\n`);
}
