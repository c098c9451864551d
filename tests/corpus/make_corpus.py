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

# The issue's case: 100,000 nested arrays in any field crashed every reader (SIGSEGV).
w('project/nested-100000-arrays.json', json.dumps(base)[:-1] + ', "description": ' + nested(100000) + '}', 'nested more than 64 levels')
w('project/nested-in-layer.json', proj(units(0)).replace('"units": 0', '"units": ' + nested(5000)), 'nested more than 64 levels')
w('project/number-1e309.json', proj(setk('training', 'seed', 0)).replace('"seed": 0', '"seed": 1e309'), 'the number 1e309 is too large')
w('project/units-1e300.json', proj(units(1e300)), "Units (units of entry 1 of layers in the file's model section) is out of range")
w('project/units-2.7.json', proj(units(2.7)), "Units (units of entry 1 of layers in the file's model section) must be a whole number")
w('project/units-2e9.json', proj(units(2000000000)), 'of memory, more than this machine has')
w('project/input-shape-overflow.json', proj(lambda p: p['model'].__setitem__('input_shape', [65536] * 3)), 'values per sample')
w('project/beta1-5.json', proj(opt('beta_1', 5)), 'β₁ (beta_1 in the file's training › optimizer section) must be in [0, 1)')
w('project/epsilon-0.json', proj(opt('epsilon', 0)), 'ε (epsilon in the file's training › optimizer section) must be a positive finite number')
w('project/epochs-2.5.json', proj(setk('training', 'epochs', 2.5)), 'Epochs (epochs in the file's training section) must be a whole number')
w('project/long-optimizer-name.json', proj(opt('name', 'x' * 100000)), 'characters)')
w('project/threads-negative.json', proj(setk('distribute', 'threads_per_device', -5)), 'Threads per device (threads_per_device in the file's distribute section) must be at least 0 and at most 1024')

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
