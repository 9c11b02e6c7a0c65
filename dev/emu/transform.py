#!/usr/bin/env python3
"""
Turns the CUDA sources llmc/kernels/*.cuh into C++ that the host emulator (dev/emu/emu.h)
compiles with g++. Usage:

    transform.py SRC_DIR OUT_DIR
    transform.py --ladders LLMC_DIR CUDA_DIR OUT_DIR    (the dev/cuda ladders; see ladders())

For every SRC_DIR/*.cuh it writes OUT_DIR/<name>.cuh with
  - each launch  kernel<<<grid, block[, smem[, stream]]>>>(args);  replaced by
        ::emu::launch("kernel", __FILE__, __LINE__, dim3(grid), dim3(block), smem, stream, kernel, args);
  - each  extern __shared__ [__align__(N)] T name[];  replaced by
        T* name = (T*)emu_dyn_smem();
  - each static  __shared__ T a[..], b[..];  followed by  EMU_STATIC_SHARED(a); EMU_STATIC_SHARED(b);
    so that the emulator poisons (and keeps per block) the static __shared__ variables that
    GCC leaves outside the shared-memory section: a template instantiation's;
  - in the files that call the tc_* tensor-core wrappers, every store statement and every
    casted load "*(T*)(p)" wrapped in EMU_SMEM_STORE / EMU_SMEM_LOAD, so that the model
    can count their shared-memory bank conflicts (see smem_access_edits);
  - a #line directive, and the line count of every replaced span kept, so that compiler
    messages, __FILE__ and __LINE__ point into the original file.
Everything else (__global__, __shared__, __syncthreads, shuffles, ...) is left to the
macros and functions of emu.h. It also copies SRC_DIR/kernels.h and writes
OUT_DIR/emu_kernels.inc, the table of every __global__ kernel (of the files that
kernels.h includes) with its __launch_bounds__, which the harness uses to check that
every kernel was launched and that launches respect the bounds.

llmc/kernels/tensorcore.cuh, the tensor-core wrappers (inline PTX), is the one exception: it is
replaced by the host model include/tensorcore_emu.h (see transform_tc).

It fails (exit status 1, with file:line) on anything it cannot transform faithfully:
a <<< that is not a launch statement of the form above, an extern __shared__ of
another form, a __global__ it cannot name, or a construct the emulator does not
support (inline PTX, __cluster_dims__, CUB, textures, legacy non-_sync warp
intrinsics, wmma beyond the include/mma.h shim, CUDA headers without a shim in
dev/emu/include). Cooperative groups pass: include/cooperative_groups.h has only what
the emulator models (this_cluster, this_thread_block), so anything else fails to
compile. cudaLaunchKernelEx needs no rewrite: emu.h makes it a macro that names the
kernel. Comments and string literals are ignored.
"""
import os
import re
import shutil
import sys

UNSUPPORTED = [
    (r'\basm\s*(volatile\s*)?\(|\b__asm__\b', 'inline PTX'),
    (r'\b__cluster_dims__\b', '__cluster_dims__ (launch the kernel with cudaLaunchKernelEx and '
     'cudaLaunchAttributeClusterDimension, which the emulator models)'),
    (r'\bcub::|<cub/', 'CUB'),
    (r'\btex[123]D\w*\s*\(|\bsurf[123]D\w*\s*\(|\bcudaTextureObject_t\b', 'textures/surfaces'),
    (r'\b__shfl(_xor|_up|_down)?\s*\(|\b__ballot\s*\(|\b__any\s*\(|\b__all\s*\(', 'legacy warp intrinsics without _sync'),
    # wmma: include/mma.h emulates bf16 matrix_a/matrix_b, fp32 accumulators, load/store/fill/mma_sync
    (r'\bwmma::(experimental|precision)\b|\b(bmma_sync|__hmma\w*|__imma\w*)\b',
     'wmma sub-byte/tf32/experimental types (the wmma shim emulates bf16 inputs with fp32 accumulation only)'),
    (r'\bnum_elements\b', 'per-element wmma fragment access (x[], num_elements: the element-to-lane mapping is '
     'unspecified and not emulated)'),
    (r'\b__activemask\s*\(', '__activemask (lane divergence is not modelled)'),
    (r'\b__nanosleep\s*\(|\bclock(64)?\s*\(', 'clocks/sleeps'),
]


# headers of the CUDA toolkit that dev/emu/include provides a shim for; any other one is an
# error (on a machine with the toolkit installed it would otherwise be picked up silently)
SHIMS = {'cuda_runtime.h', 'cuda_bf16.h', 'cublasLt.h', 'mma.h', 'cooperative_groups.h'}
CUDA_HEADER = re.compile(r'^(cuda|cu[a-z]*|nv|mma|sm_\d|crt/|thrust/|cub/|cooperative_groups|library_types|vector_types|device_)')


class TransformError(Exception):
    pass


def code_mask(s):
    """s with comments and string/char literals replaced by spaces (newlines kept), so
    that offsets match the original text."""
    out = list(s)
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if s.startswith('//', i):
            j = s.find('\n', i)
            j = n if j < 0 else j
            for k in range(i, j):
                out[k] = ' '
            i = j
        elif s.startswith('/*', i):
            j = s.find('*/', i + 2)
            if j < 0:
                raise TransformError('unterminated /* comment at offset %d' % i)
            for k in range(i, j + 2):
                if s[k] != '\n':
                    out[k] = ' '
            i = j + 2
        elif c == '"' or c == "'":
            j = i + 1
            while j < n and s[j] != c:
                j += 2 if s[j] == '\\' else 1
            for k in range(i + 1, min(j, n)):
                if s[k] != '\n':
                    out[k] = ' '
            i = j + 1
        else:
            i += 1
    return ''.join(out)


def line_of(s, off):
    return s.count('\n', 0, off) + 1


def match_close(m, i, open_ch, close_ch):
    """index just past the bracket that closes m[i] == open_ch (m is the code mask)"""
    depth = 0
    for j in range(i, len(m)):
        if m[j] in '([{':
            depth += 1
        elif m[j] in ')]}':
            depth -= 1
            if depth == 0:
                if m[j] != close_ch:
                    return -1
                return j + 1
    return -1


def split_top(x):
    parts, depth, cur = [], 0, ''
    for ch in x:
        if ch in '([{':
            depth += 1
        elif ch in ')]}':
            depth -= 1
        if ch == ',' and depth == 0:
            parts.append(cur.strip())
            cur = ''
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


# llmc/kernels/tensorcore.cuh (inline PTX: mma.sync, ldmatrix, cp.async) is not transformed but
# REPLACED by the host model of its documented fragment layouts, include/tensorcore_emu.h.
# Both must define the same tc_* functions, so that a wrapper added on one side only is an
# error here rather than a kernel that silently misses its model.
TC_FILE = 'tensorcore.cuh'
TC_MODEL = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'include', 'tensorcore_emu.h')


def tc_api(text, model):
    m = code_mask(text)
    names = set(re.findall(r'\b(?:void|tc_u32)\s+(tc_\w+)\s*\(', m))
    if model:
        names |= set(re.findall(r'^[ \t]*#[ \t]*define[ \t]+(tc_\w+)\(', m, re.M))
    return names


def transform_tc(path):
    s = open(path).read()
    real, model = tc_api(s, False), tc_api(open(TC_MODEL).read(), True)
    if not real or real != model:
        raise TransformError('%s: its tc_* functions (%s) differ from those of the emulator model %s (%s): '
                             'add the missing ones to the model' % (path, ', '.join(sorted(real)), TC_MODEL,
                                                                    ', '.join(sorted(model))))
    text = '#pragma once\n#include "tensorcore_emu.h"  // dev/emu/transform.py: the model replaces %s\n' % path
    return '#line 1 "%s"\n%s' % (path, text), [], 0


# Shared-memory accesses of the tensor-core kernels, for the bank-conflict count
# (include/smem_banks.h). In a file that calls the tc_* wrappers, every store statement
# "LVALUE op= x" whose lvalue is a subscript, a dereference or a member through a pointer
# becomes "EMU_SMEM_STORE(LVALUE) op= x", and every casted load "*(T*)(p)" becomes
# "(*EMU_SMEM_LOAD((T*)(p)))"; the model (include/tensorcore_emu.h) records those that
# touch shared memory, with their call site, and lets everything else through. Not
# instrumented: the second and later targets of a chained assignment, assignments inside
# expressions, and loads other than the casted form (plain a[i] and *p reads).
ASSIGN_OP = re.compile(r'<<=|>>=|[-+*/%&|^]=|(?<![=!<>])=(?!=)')
CAST_DEREF = re.compile(r'\*\s*\(\s*(?:const\s+)?[A-Za-z_]\w*\s*\*\s*\)\s*\(')
LVALUE = re.compile(r'^(\*\s*)?(\w+|\(\))(\s*(\[\]|\(\)|\.\s*\w+|->\s*\w+))*$')
STMT_PREFIX = re.compile(r'\s*(?:(if|for|while)\s*(?=\()|(else|do)\b)')


SMEM_INSTRUMENTED = {}  # path -> stores and loads instrumented (for the log)


def collapse(x):
    """x with every bracketed group emptied: 'a[i + 1](b)' -> 'a[]()'"""
    out, depth = [], 0
    for ch in x:
        if ch in '([{':
            if depth == 0:
                out.append(ch)
            depth += 1
        elif ch in ')]}':
            depth -= 1
            if depth == 0:
                out.append(ch)
        elif depth == 0:
            out.append(ch)
    return ''.join(out)


def smem_access_edits(m):
    """insert-only edits (offset, offset, text) that instrument the stores and casted loads
    of the code mask m (see above)"""
    # preprocessor lines (and their continuations) are not code to instrument
    mm = list(m)
    for d in re.finditer(r'^[ \t]*#(?:[^\n]*\\\n)*[^\n]*', m, re.M):
        for k in range(d.start(), d.end()):
            if mm[k] != '\n':
                mm[k] = ' '
    m = ''.join(mm)
    openers = {')': '(', ']': '[', '}': '{'}
    edits, spans = [], []
    for a in ASSIGN_OP.finditer(m):
        # back to the start of the statement: skip bracketed groups; stop at ; { } or an
        # unmatched opener
        j = a.start()
        while j > 0:
            c = m[j - 1]
            if c in ')]':
                depth, k = 0, j - 1
                while k >= 0:
                    if m[k] in ')]}':
                        depth += 1
                    elif m[k] in '([{':
                        depth -= 1
                        if depth == 0:
                            break
                    k -= 1
                if k < 0 or m[k] != openers[c]:
                    break
                j = k
            elif c in ';{}([':
                break
            else:
                j -= 1
        start = j
        while True:  # drop "if (...)", "for (...)", "while (...)", "else", "do" before the lvalue
            pm = STMT_PREFIX.match(m, start)
            if not pm or start >= a.start():
                break
            if pm.group(1):
                q = match_close(m, pm.end(), '(', ')')
                if q < 0 or q > a.start():
                    break
                start = q
            else:
                start = pm.end()
        while start < a.start() and m[start] in ' \t\n':
            start += 1
        end = a.start()
        while end > start and m[end - 1] in ' \t\n':
            end -= 1
        lv = collapse(m[start:end])
        if end <= start or not LVALUE.match(lv) or not ('[' in lv or lv.startswith('*') or '->' in lv):
            continue
        edits.append((start, start, 'EMU_SMEM_STORE('))
        edits.append((end, end, ')'))
        spans.append((start, end))
    for d in CAST_DEREF.finditer(m):
        if any(a <= d.start() < b for a, b in spans):
            continue  # the target of a store
        q = match_close(m, d.end() - 1, '(', ')')
        if q < 0:
            continue
        edits.append((d.start(), d.start() + 1, '(*EMU_SMEM_LOAD('))
        edits.append((q, q, '))'))
    return edits


def static_shared_edits(m, where):
    """After every static  __shared__ [__align__(N)] T a[..], b[..];  (m is the code mask),
    EMU_STATIC_SHARED(a); EMU_STATIC_SHARED(b); on the same line. emu.h poisons the static
    __shared__ section before every block (and keeps it per block in a cluster); GCC ignores
    the section attribute for the static locals of a template instantiation, and the
    registration is how the emulator finds those (it ignores the variables in the section)."""
    edits = []
    for e in re.finditer(r'\b__shared__\b', m):
        if re.search(r'\bextern\s+$', m[max(0, e.start() - 40):e.start()]):
            continue  # dynamic shared memory, rewritten above
        semi = m.find(';', e.end())
        decl = re.sub(r'__align__\s*\(\s*\d+\s*\)', ' ', m[e.end():semi])
        if semi < 0 or re.search(r'[<>={}()]', decl):
            raise TransformError('%s: write static shared memory as "__shared__ [__align__(N)] T a[..], b[..];" '
                                 '(no template arguments, initialisers or parentheses: a typedef first)' % where(e.start()))
        names = []
        for part in split_top(decl):
            part = re.sub(r'\[[^\]]*\]', ' ', part).strip()
            dm = re.search(r'([A-Za-z_]\w*)$', part)
            if not dm or (not names and not re.search(r'\w[\s*&]+[A-Za-z_]\w*$', part)):
                raise TransformError('%s: cannot find the name of a __shared__ variable in "%s"' % (where(e.start()), part))
            names.append(dm.group(1))
        edits.append((semi + 1, semi + 1, ''.join(' EMU_STATIC_SHARED(%s);' % n for n in names)))
    return edits


def transform(path, register_bounds=False):
    if os.path.basename(path) == TC_FILE:
        return transform_tc(path)
    s = open(path).read()
    m = code_mask(s)
    where = lambda off: '%s:%d' % (path, line_of(s, off))

    for inc in re.finditer(r'^[ \t]*#[ \t]*include[ \t]*<([^>]+)>', s, re.M):
        h = inc.group(1).strip()
        if m[inc.end() - 1] == ' ':
            continue  # inside a comment
        if h not in SHIMS and CUDA_HEADER.match(h):
            raise TransformError('%s: <%s> has no emulation shim in dev/emu/include (have: %s)' % (
                where(inc.start()), h, ', '.join(sorted(SHIMS))))

    for pat, what in UNSUPPORTED:
        mm = re.search(pat, m)
        if mm:
            raise TransformError('%s: %s is not supported by the emulator (found %r)' % (where(mm.start()), what, mm.group(0)))

    # kernels and their launch bounds
    kernels, edits_bounds = [], []
    for g in re.finditer(r'\b__global__\b', m):
        rest = m[g.end():]
        k = re.match(r'\s*(?:static\s+)?(?:__launch_bounds__\s*(\((?:[^()]|\([^()]*\))*\))\s*)?void\s+'
                     r'(?:__launch_bounds__\s*(\((?:[^()]|\([^()]*\))*\))\s*)?(\w+)\s*\(', rest)
        if not k:
            raise TransformError('%s: cannot read the kernel declared here; write it as '
                                 '"__global__ void [__launch_bounds__(N)] name(...)"' % where(g.start()))
        bounds = k.group(1) or k.group(2)
        bound = split_top(bounds[1:-1])[0] if bounds else '0'
        kernels.append((k.group(3), bound, line_of(s, g.start())))
        if register_bounds and bounds:
            # the bound may name constants of the kernel's namespace: register it right
            # after the kernel's body, in the kernel's scope (ladder_emu.h reads it)
            p = g.end() + k.end() - 1
            q = match_close(m, p, '(', ')')
            r = q
            while 0 <= r < len(m) and m[r] in ' \t\n':
                r += 1
            if q < 0 or r >= len(m) or m[r] != '{':
                raise TransformError('%s: cannot find the body of kernel %s' % (where(g.start()), k.group(3)))
            e = match_close(m, r, '{', '}')
            if e < 0:
                raise TransformError('%s: unbalanced body of kernel %s' % (where(g.start()), k.group(3)))
            edits_bounds.append((e, e, ' static ::emu::BoundReg emu_bound_%s("%s", (int)(%s));' % (
                k.group(3), k.group(3), bound)))

    edits = list(edits_bounds)  # (start, end, replacement)

    # launches
    for L in re.finditer(r'<<<', m):
        start_cfg = L.end()
        # kernel name: identifier, possibly qualified or with template arguments, before <<<
        j = L.start()
        while j > 0 and m[j - 1] in ' \t':
            j -= 1
        name_end = j
        if j > 0 and m[j - 1] == '>':  # template arguments
            depth = 0
            while j > 0:
                j -= 1
                if m[j] == '>':
                    depth += 1
                elif m[j] == '<':
                    depth -= 1
                    if depth == 0:
                        break
        while j > 0 and (m[j - 1].isalnum() or m[j - 1] in '_:'):
            j -= 1
        name = s[j:name_end].strip()
        if not re.match(r'^[A-Za-z_][\w:]*(<.*>)?$', name, re.S):
            raise TransformError('%s: cannot find the kernel name before "<<<" (write "kernel<<<...>>>(...);")' % where(L.start()))
        # configuration up to >>> at bracket depth 0
        depth, k = 0, start_cfg
        while k < len(m):
            if m[k] in '([{':
                depth += 1
            elif m[k] in ')]}':
                depth -= 1
            elif depth == 0 and m.startswith('>>>', k):
                break
            k += 1
        if k >= len(m):
            raise TransformError('%s: no ">>>" closes this launch configuration' % where(L.start()))
        cfg = split_top(s[start_cfg:k])
        if not 2 <= len(cfg) <= 4:
            raise TransformError('%s: launch configuration needs 2 to 4 arguments, found %d' % (where(L.start()), len(cfg)))
        p = k + 3
        while p < len(m) and m[p] in ' \t\n':
            p += 1
        if p >= len(m) or m[p] != '(':
            raise TransformError('%s: expected "(" with the kernel arguments after ">>>"' % where(L.start()))
        q = match_close(m, p, '(', ')')
        if q < 0:
            raise TransformError('%s: unbalanced kernel argument list' % where(L.start()))
        r = q
        while r < len(m) and m[r] in ' \t\n':
            r += 1
        if r >= len(m) or m[r] != ';':
            raise TransformError('%s: a launch must be a statement of its own, "kernel<<<...>>>(...);"' % where(L.start()))
        args = s[p + 1:q - 1].strip()
        grid, block = cfg[0], cfg[1]
        smem = cfg[2] if len(cfg) > 2 else '0'
        stream = cfg[3] if len(cfg) > 3 else '0'
        kname = re.sub(r'\s+', ' ', name)
        rep = '::emu::launch("%s", __FILE__, __LINE__, dim3(%s), dim3(%s), (size_t)(%s), (cudaStream_t)(%s), %s%s%s);' % (
            kname, grid, block, smem, stream, name, ', ' if args else '', args)
        rep = rep.replace('\n', ' ') + '\n' * s.count('\n', j, r + 1)
        edits.append((j, r + 1, rep))

    # dynamic shared memory
    for e in re.finditer(r'\bextern\s+__shared__\b', m):
        semi = m.find(';', e.end())
        decl = m[e.end():semi]
        d = re.sub(r'__align__\s*\(\s*\d+\s*\)', ' ', decl)
        dm = re.match(r'^\s*([A-Za-z_][\w:]*(?:\s+[A-Za-z_][\w:]*)*)\s+([A-Za-z_]\w*)\s*\[\s*\]\s*$', d)
        if semi < 0 or not dm:
            raise TransformError('%s: write dynamic shared memory as "extern __shared__ [__align__(N)] T name[];"' % where(e.start()))
        typ, nm = dm.group(1), dm.group(2)
        rep = '%s* %s = (%s*)emu_dyn_smem();' % (typ, nm, typ)
        rep += '\n' * s.count('\n', e.start(), semi + 1)
        edits.append((e.start(), semi + 1, rep))

    # static shared memory: each variable registered right after its declaration (on the
    # same line), for the ones GCC leaves outside the poisoned section (see static_shared_edits)
    edits += static_shared_edits(m, where)

    # the tensor-core kernels' shared-memory stores and loads (bank conflicts)
    n_smem = 0
    if re.search(r'\btc_(?:ldmatrix|cp_async|mma)\w*\s*\(', m):
        smem_edits = smem_access_edits(m)
        n_smem = sum(1 for e in smem_edits if e[2] in ('EMU_SMEM_STORE(', '(*EMU_SMEM_LOAD('))
        edits += smem_edits
    SMEM_INSTRUMENTED[path] = n_smem

    edits.sort()
    for a, b in zip(edits, edits[1:]):
        if a[1] > b[0]:
            raise TransformError('%s: overlapping constructs' % where(b[0]))
    out, pos = [], 0
    for a, b, rep in edits:
        out.append(s[pos:a])
        out.append(rep)
        pos = b
    out.append(s[pos:])
    t = ''.join(out)
    tm = code_mask(t)
    if '<<<' in tm or '>>>' in tm:
        raise TransformError('%s: a "<<<" or ">>>" is left after the transform' % path)
    if re.search(r'\bextern\s+__shared__\b', tm):
        raise TransformError('%s: an extern __shared__ is left after the transform' % path)
    if t.count('\n') != s.count('\n'):
        raise TransformError('%s: internal error: line count changed' % path)
    n_launch = sum(1 for e in edits if e[2].startswith('::emu::launch'))
    return '#line 1 "%s"\n%s' % (path, t), kernels, n_launch


def cuh_included(folder, name):
    """The .cuh files of FOLDER that FOLDER/NAME includes, directly or through other files
    of FOLDER: what a build of NAME compiles (the kernel table lists their kernels)."""
    found, todo = set(), [name]
    while todo:
        f = todo.pop()
        path = os.path.join(folder, f)
        if not os.path.isfile(path):
            continue
        for inc in re.findall(r'^[ \t]*#[ \t]*include[ \t]*"(\w+\.(?:cuh|h))"', open(path).read(), re.M):
            if inc not in found:
                found.add(inc)
                todo.append(inc)
    return {f for f in found if f.endswith('.cuh')}


def mirror(src, dst, compiled, log=False):
    """Writes the tree SRC (llmc) into DST with the same folders: every .cuh transformed,
    every other file copied, so that the relative #includes between them hold. Returns
    every kernel of the .cuh files as (name, bound, path); a name defined twice is an
    error. With log, prints a line per transformed file (COMPILED: the files kernels.h
    includes; the others are transformed, not compiled)."""
    found, seen = [], {}
    for root, dirs, files in os.walk(src):
        dirs.sort()
        rel = os.path.relpath(root, src)
        os.makedirs(os.path.join(dst, rel), exist_ok=True)
        for f in sorted(files):
            path = os.path.join(root, f)
            out = os.path.join(dst, rel, f)
            if not f.endswith('.cuh'):
                shutil.copy(path, out)
                continue
            text, kernels, n_launch = transform(path)
            with open(out, 'w') as fo:
                fo.write(text)
            for name, bound, line in kernels:
                if name in seen:
                    raise TransformError('%s:%d: kernel %s also defined in %s' % (path, line, name, seen[name]))
                seen[name] = path
            found += [(name, bound, path) for name, bound, line in kernels]
            if log:
                n_smem = SMEM_INSTRUMENTED.get(path, 0)
                print('transform: %-18s %d kernels, %d launches%s%s' % (f, len(kernels), n_launch,
                      ', %d stores and casted loads instrumented (bank conflicts)' % n_smem if n_smem else '',
                      '' if f in compiled else '  (not included by kernels.h: transformed, not compiled)'))
    return found


def ladders(llmc, cuda, dst):
    """--ladders mode: the dev/cuda kernel ladders (standalone programs with a main) and
    the llmc sources they include, for dev/emu/run_ladders.sh. Writes
      DST/llmc/               llmc's tree: every .cuh transformed, every other file copied (the
                              CPU twins for cpu_reference.cpp among them), so that a ladder's
                              #include "../../llmc/kernels/X.cuh" gets the transformed one
      DST/dev/cuda/*.h        transformed (ladder.h, cpu_reference.h); *.cpp copied
      DST/dev/cuda/X.cu       transformed, with the kernel table (the ladder's own kernels and
                              llmc's) and #include "ladder_emu.h" (dev/emu) appended after its
                              last line, so that the line numbers of the ladder are unchanged
    and prints the ladder name and its own kernels, one ladder a line: "X k1 k2 ..."."""
    os.makedirs(os.path.join(dst, 'dev', 'cuda'), exist_ok=True)
    llmc_kernels = mirror(llmc, os.path.join(dst, 'llmc'), {})
    seen = {name: path for name, bound, path in llmc_kernels}
    for f in sorted(os.listdir(cuda)):
        src = os.path.join(cuda, f)
        if f.endswith('.cpp') and os.path.isfile(src):  # cpu_reference.cpp: host code, copied
            shutil.copy(src, os.path.join(dst, 'dev', 'cuda', f))
            continue
        if not (f.endswith('.h') and os.path.isfile(src)):
            continue
        text, kernels, _ = transform(src)
        if kernels:
            raise TransformError('%s: kernels in a shared ladder header are not supported' % src)
        with open(os.path.join(dst, 'dev', 'cuda', f), 'w') as fo:
            fo.write(text)
    for f in sorted(os.listdir(cuda)):
        src = os.path.join(cuda, f)
        if not f.endswith('.cu'):
            continue
        text, kernels, n_launch = transform(src, register_bounds=True)
        own = {}
        for name, bound, line in kernels:
            if name in seen or name in own:
                raise TransformError('%s:%d: kernel %s also defined in %s' % (src, line, name, seen.get(name, src)))
            own[name] = line
        lad = f[:-3]
        # the ladder's kernels (bounds registered next to each, see transform) and those
        # of the llmc files it includes (whose bound macros are visible here)
        incs = set()
        for inc in re.findall(r'^[ \t]*#[ \t]*include[ \t]*"\.\./\.\./llmc/kernels/(\w+\.cuh)"', open(src).read(), re.M):
            incs |= {inc} | cuh_included(os.path.join(llmc, 'kernels'), inc)
        table = [(name, '0', src) for name, bound, line in kernels] + \
                [k for k in llmc_kernels if os.path.basename(k[2]) in incs]
        tail = ['', '#line 1 "%s (dev/emu/transform.py: kernel table)"' % src,
                'static const emu::KernelInfo emu_kernel_list[] = {']
        tail += ['    {"%s", (int)(%s)},  // %s' % k for k in table]
        tail += ['};', 'static const int emu_ladder_own_kernels = %d;' % len(kernels),
                 '#define EMU_LADDER_NAME "%s"' % lad, '#include "ladder_emu.h"', '']
        with open(os.path.join(dst, 'dev', 'cuda', f), 'w') as fo:
            fo.write(text if text.endswith('\n') else text + '\n')
            fo.write('\n'.join(tail))
        print('%s %s' % (lad, ' '.join(name for name, bound, line in kernels)))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == '--ladders':
        try:
            ladders(sys.argv[2], sys.argv[3], sys.argv[4])
        except TransformError as e:
            sys.exit('transform.py: error: %s' % e)
        return
    if len(sys.argv) != 3:
        sys.exit('usage: transform.py SRC_DIR OUT_DIR  |  transform.py --ladders LLMC_DIR CUDA_DIR OUT_DIR')
    src, dst = sys.argv[1], sys.argv[2]
    kdir = os.path.join(src, 'kernels')
    if not os.path.isfile(os.path.join(kdir, 'kernels.h')):
        sys.exit('transform.py: %s has no kernels/kernels.h (SRC_DIR is the llmc tree)' % src)
    compiled = cuh_included(kdir, 'kernels.h')
    try:
        kernels = mirror(src, dst, compiled, log=True)
    except TransformError as e:
        sys.exit('transform.py: error: %s' % e)
    if not kernels:
        sys.exit('transform.py: no .cuh files in %s' % src)
    with open(os.path.join(dst, 'kernels', 'emu_kernels.inc'), 'w') as fo:
        fo.write('// generated by dev/emu/transform.py from %s: every __global__ kernel, its __launch_bounds__ (0: none)\n' % src)
        fo.write('static const emu::KernelInfo emu_kernel_list[] = {\n')
        for name, bound, f in kernels:
            if os.path.basename(f) in compiled:
                fo.write('    {"%s", (int)(%s)},  // %s\n' % (name, bound, os.path.basename(f)))
        fo.write('};\n')


if __name__ == '__main__':
    main()
