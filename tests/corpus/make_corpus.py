#!/usr/bin/env python3
# Writes the inputs that crashed or misbehaved before issue 11 (one class of input per file), each
# with FILE.expect holding the text its refusal must contain. fuzz_replay (ctest fuzz.corpus_replay)
# reads them all; a crash that libFuzzer finds later is copied here as it is (no generator needed).
import json, os, sqlite3, struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, '..', '..'))
os.chdir(HERE)

def w(path, data, expect=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'wb' if isinstance(data, bytes) else 'w') as f:
        f.write(data)
    if expect is not None:
        with open(path + '.expect', 'w') as f:
            f.write(expect + '\n')

def nested(n):
    return '[' * n + ']' * n

base = json.load(open(os.path.join(ROOT, 'projects', 'spirals.json')))
def proj(mut):
    p = json.loads(json.dumps(base)); mut(p); return json.dumps(p)
def setk(section, key, value):
    return lambda p: p.setdefault(section, {}).__setitem__(key, value)
def units(v):
    return lambda p: p['model']['layers'][0].__setitem__('units', v)
def opt(k, v):
    def m(p):
        o = p['training'].get('optimizer', {})
        o = {'name': o} if isinstance(o, str) else o
        o.setdefault('name', 'adam'); o[k] = v
        p['training']['optimizer'] = o
    return m

# The case: 100,000 nested arrays in any field crashed every reader (SIGSEGV).
w('project/nested-100000-arrays.json', json.dumps(base)[:-1] + ', "description": ' + nested(100000) + '}', 'nested more than 64 levels')
w('project/nested-in-layer.json', proj(units(0)).replace('"units": 0', '"units": ' + nested(5000)), 'nested more than 64 levels')
w('project/number-1e309.json', proj(setk('training', 'seed', 0)).replace('"seed": 0', '"seed": 1e309'), 'the number 1e309 is too large')
w('project/units-1e300.json', proj(units(1e300)), "Units (units of entry 1 of layers in the file's model section) is out of range")
w('project/units-2.7.json', proj(units(2.7)), "Units (units of entry 1 of layers in the file's model section) must be a whole number")
w('project/units-2e9.json', proj(units(2000000000)), 'of memory, more than this machine has')
w('project/input-shape-overflow.json', proj(lambda p: p['model'].__setitem__('input_shape', [65536] * 3)), 'values per sample')
w('project/beta1-5.json', proj(opt('beta_1', 5)), "β₁ (beta_1 in the file's training › optimizer section) must be in [0, 1)")
w('project/epsilon-0.json', proj(opt('epsilon', 0)), "ε (epsilon in the file's training › optimizer section) must be a positive finite number")
w('project/epochs-2.5.json', proj(setk('training', 'epochs', 2.5)), "Epochs (epochs in the file's training section) must be a whole number")
w('project/long-optimizer-name.json', proj(opt('name', 'x' * 100000)), 'characters)')
w('project/threads-negative.json', proj(setk('distribute', 'threads_per_device', -5)), "Threads per device (threads_per_device in the file's distribute section) must be at least 0 and at most 1024")

# Weights files of the 2-4-3 model the weights target loads into (27 parameters).
def mlw(arch, count=27, params=None):
    a = arch.encode()
    params = b'\0' * (4 * count) if params is None else params
    return b'MLWEIGHT' + struct.pack('<II', 1, len(a)) + a + struct.pack('<Q', count) + params + struct.pack('<Q', 0)
w('weights/nested-architecture.mlw', mlw(nested(20000)), 'its architecture header is not the JSON object')
w('weights/architecture-not-object.mlw', mlw('[1, 2, 3]'), 'its architecture header is not the JSON object')
w('weights/layers-not-objects.mlw', mlw('{"input_shape": [2], "layers": [1, "x", null]}'), 'its architecture header is not the JSON object')
w('weights/huge-count.mlw', mlw('{"input_shape": [2], "layers": []}', count=2**61, params=b''), 'belongs to another architecture')

# Lessons: long text went through std::regex (recursive per character) and crashed `learn list`.
lessons = sorted(f for f in os.listdir(os.path.join(ROOT, 'projects', 'lessons')) if f.endswith('.json'))
lesson = json.load(open(os.path.join(ROOT, 'projects', 'lessons', lessons[0])))
def les(mut):
    l = json.loads(json.dumps(lesson)); mut(l); return json.dumps(l)
w('lesson/long-reveal.json', les(lambda l: l.__setitem__('reveal', 'x' * 100000 + ' {params}')))
w('lesson/long-bad-label.json', les(lambda l: l['experiments'][0].__setitem__('label', 'a' * 20000 + 'B')), 'use lower-case letters, digits and _')
w('lesson/long-id.json', les(lambda l: l.__setitem__('id', 'a' * 20000 + 'B')), 'use lower-case letters, digits and -')
w('lesson/nested.json', json.dumps(lesson)[:-1] + ', "idea": ' + nested(5000) + '}', 'nested more than 64 levels')
w('lesson/many-braces.json', les(lambda l: l.__setitem__('reveal', '{' * 20000 + '{params}' + '}' * 20000)))

# Run stores (512-byte pages keep them small).
def store(path, app, version, tables=True, expect=None):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path):
        os.remove(path)
    c = sqlite3.connect(path)
    c.execute('PRAGMA page_size=512')
    if tables:
        c.execute('CREATE TABLE runs(id INTEGER PRIMARY KEY)')
    c.execute('PRAGMA application_id=%d' % app)
    c.execute('PRAGMA user_version=%d' % version)
    c.commit(); c.close()
    with open(path + '.expect', 'w') as f:
        f.write(expect + '\n')
store('store/negative-user-version.sqlite', 0x4D4C6162, -5, expect='schema version -5')
store('store/foreign-user-version.sqlite', 0, 7, tables=False, expect='user_version 7')
store('store/huge-user-version.sqlite', 0x4D4C6162, 2**31 - 1, expect='newer Mirrorlab')

# IDX: the first byte cuts the input into images and labels; dimensions 0xffffffff overflowed.
img = struct.pack('>IIII', 0x803, 0xffffffff, 0xffffffff, 0xffffffff) + b'\0' * 16
lbl = struct.pack('>II', 0x801, 1) + b'\0'
size = 1 + len(img) + len(lbl)
first = next(b for b in range(256) if min(size - 1, b * size // 256 + 1) == len(img) + 1)
w('idx/dims-ffffffff.bin', bytes([first]) + img + lbl, 'overflows')

# CSV: values quoted in messages are cut.
w('csv/long-cell.csv', 'label,x\n1,' + 'y' * 100000 + '\n', 'reads numbers only')
w('csv/long-label-column.csv', 'a' * 20000 + ',x\n1,2\n', "has no label column 'label'")
w('csv/bad-quotes.csv', 'label,x\n"1,"2\n1,"\n')

# ---- Second round: the .npz/.npy reader, weights and checkpoints with valid checksums but bad
# contents, a damaged IDX label, CSV headers, NUL bytes in quoted values, out-of-range numbers.
import math, zipfile, io, zlib

def npy(dict_text, data=b''):
    h = dict_text
    while (10 + len(h) + 1) % 64:
        h += ' '
    h += '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(h)) + h.encode() + data

def npz(entries, method=zipfile.ZIP_STORED):
    b = io.BytesIO()
    with zipfile.ZipFile(b, 'w', method) as z:
        for name, data in entries:
            z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data, compress_type=method)
    return b.getvalue()

def f32(values):
    return struct.pack('<%df' % len(values), *values)

D = "{'descr': '<f4', 'fortran_order': False, 'shape': "
no_paren = npy(D + '(2, 4 }', f32([0.0] * 8))
w('npz/shape-no-paren.npy', no_paren, "'shape' has no closing ')'")
w('npz/shape-no-paren.npz', npz([('dense/kernel.npy', no_paren)]), "'shape' has no closing ')'")
w('npz/shape-20-digits.npz', npz([('dense/kernel.npy', npy(D + '(99999999999999999999, 64), }'))]), 'larger than any array')
w('npz/shape-2pow62.npz', npz([('dense/kernel.npy', npy(D + '(4611686018427387904,), }'))]), 'needs more than any file holds')
w('npz/shape-2pow62.npy', npy(D + '(4611686018427387904,), }'), 'needs more than any file holds')

# The 2-4-3 model of the weights target, in Keras' names, with one bad value.
def shape_text(s):
    return '(%d,)' % s[0] if len(s) == 1 else '(' + ', '.join(str(d) for d in s) + ')'
def model_npz(bad=None):
    arrays = [('dense/kernel', (2, 4), [0.1] * 8), ('dense/bias', (4,), [0.0] * 4),
              ('dense_1/kernel', (4, 3), [0.2] * 12), ('dense_1/bias', (3,), [0.0] * 3)]
    if bad is not None:
        arrays[2][2][4] = bad
    return npz([(n + '.npy', npy(D + shape_text(s) + ', }', f32(v))) for n, s, v in arrays], zipfile.ZIP_DEFLATED)
w('npz/nan-weights.npz', model_npz(float('nan')), "array 'dense_1/kernel' in npz file")
w('npz/inf-weights.npz', model_npz(float('inf')), 'holds +inf (value 5 of its 12)')

# A deflated entry that claims 4 GiB: refused before anything is allocated.
good = model_npz()
i = good.index(b'PK\x01\x02')
bomb = bytearray(good)
bomb[i + 24:i + 28] = struct.pack('<I', 0xfffffff0)
w('npz/claims-4gib.npz', bytes(bomb), 'compressed ones')
cut = bytearray(good)
cut[i + 28:i + 30] = struct.pack('<H', 0xffff)
w('npz/name-past-end.npz', bytes(cut), 'central directory runs past the end')

# Weights files with a valid checksum (version 2: the standard FNV-1a offset basis); version 1's
# shorter basis is still read.
def fnv1a(data, h=14695981039346656037):
    for b in data:
        h = ((h ^ b) * 1099511628211) & 0xffffffffffffffff
    return h
ARCH = json.dumps({"input_shape": [2], "layers": [
    {"type": "Dense", "name": "dense", "output_shape": [4], "params": 12},
    {"type": "Dense", "name": "dense_1", "output_shape": [3], "params": 15}]})
def mlw2(count, params, version=2, basis=14695981039346656037):
    a = ARCH.encode()
    return (b'MLWEIGHT' + struct.pack('<II', version, len(a)) + a + struct.pack('<Q', count) + params +
            struct.pack('<Q', fnv1a(params, basis)))
params27 = f32([0.25] * 27)
# The same architecture with a corrupted count: damage, not "another architecture" printed twice.
w('weights/count-corrupted.mlw', mlw2(28, params27 + f32([0.0])), 'does not match its own architecture, which has 27 parameters')
w('weights/nan.mlw', mlw2(27, f32([0.25] * 20 + [float('nan')] + [0.25] * 6)), "holds NaN in layer 2 'dense_1' (Dense), value 9 of its 15")
w('weights/legacy-v1.mlw', mlw2(27, params27, version=1, basis=1469598103934665603), 'accepted')
w('weights/arch-length-past-end.mlw', b'MLWEIGHT' + struct.pack('<II', 2, 60000000) + b'{}', 'architecture header claims 60000000 bytes')

# IDX: one label 200 among 0..9 is a damaged byte, not a 201st class.
def idx_pair(n):
    img = struct.pack('>IIII', 0x803, n, 1, 1) + bytes(i % 256 for i in range(n))
    labels = bytearray(i % 10 for i in range(n))
    labels[57] = 200
    return img, struct.pack('>II', 0x801, n) + bytes(labels)
for n in range(200, 300):  # a count whose cut the framing byte can express
    img, lbl = idx_pair(n)
    size = 1 + len(img) + len(lbl)
    first = next((b for b in range(256) if min(size - 1, b * size // 256 + 1) == len(img) + 1), None)
    if first is not None:
        break
w('idx/label-200.bin', bytes([first]) + img + lbl, 'sample 58 has label 200, far outside the labels 0..9')

# CSV: a header naming a column twice; a NUL inside a quoted cell is escaped, not the message's end.
w('csv/duplicate-header.csv', 'label,a,b,a\n0,1,2,3\n1,4,5,6\n', "has two columns named 'a' (columns 2 and 4)")
w('csv/nul-in-cell.csv', b'label,x\n1,ab\x00cd\n', "holds text ('ab\\x00cd')")

# Projects: a count beyond the field's type names the field's real range.
w('project/epochs-1e20.json', proj(setk('training', 'epochs', 1e20)), 'must be at least 1 and at most 1000000, got 1e+20')

# Checkpoints with a valid checksum: impossible header values and NaN weights are refused by name;
# a buffer size past the file's end is refused before anything is allocated.
def mlck(header, params, slots=(), version=2, count=None):
    h = json.dumps(header).encode()
    body = struct.pack('<II', version, len(h)) + h
    body += struct.pack('<Q', len(params) if count is None else count) + f32(params)
    body += struct.pack('<I', len(slots))
    for s in slots:
        body += struct.pack('<Q', len(s)) + f32(s)
    return b'MLCHKPT1' + body + struct.pack('<Q', fnv1a(body))
CK = {"run_id": 3, "architecture": json.loads(ARCH), "optimizer": "adam", "optimizer_iterations": 10,
      "rng": {"seed": 1, "shuffle_key": 2}, "global_batch": 64, "replicas": 2, "devices": "cpu:2",
      "position": {"step": 10, "epoch": 2, "step_in_epoch": 0, "wall": 1.5, "epoch_start": 1.5, "loss_sum": 0,
                   "metric_sum": 0, "allreduce_seconds": 0, "wait_seconds": 0, "all_seconds": 0, "samples": 0,
                   "last_val_loss": None, "last_val_metric": None, "best_loss": 0, "since_best": 0}}
def ck(**kw):
    c = json.loads(json.dumps(CK)); c.update(kw); return c
w('checkpoint/valid.mlck', mlck(CK, [0.25] * 27, ([0.0] * 27, [0.0] * 27)), 'accepted')
w('checkpoint/global-batch-negative.mlck', mlck(ck(global_batch=-7), [0.25] * 27), 'its header says global_batch -7')
w('checkpoint/replicas-zero.mlck', mlck(ck(replicas=0), [0.25] * 27), 'its header says replicas 0')
w('checkpoint/nan-params.mlck', mlck(CK, [0.25] * 3 + [float('nan')] + [0.25] * 23),
  "holds NaN in layer 1 'dense' (Dense), value 4 of its 12")
w('checkpoint/inf-slot.mlck', mlck(CK, [0.25] * 27, ([0.0] * 26 + [float('-inf')],)),
  "in the optimizer's state (slot 1), -inf in layer 2 'dense_1'")
w('checkpoint/count-past-end.mlck', mlck(CK, [], count=2**33), 'is truncated')
w('checkpoint/version-1-legacy.mlck', b'MLCHKPT1' + (lambda b: b + struct.pack('<Q', fnv1a(b, 1469598103934665603)))(
    mlck(CK, [0.25] * 27)[8:-8].replace(struct.pack('<I', 2), struct.pack('<I', 1), 1)), 'accepted')
