#!/usr/bin/python3
"""Generates the NumPy reference vectors used by tests/unit/lib/st_slice.c and
tests/unit/lib/st_npy.c, so those C tests need no Python at run time.

Run with the system Python that has numpy:  /usr/bin/python3 tests/unit/lib/vectors/gen_vectors.py
Outputs (committed): slice.tsv, npy.tsv beside this script. Deterministic (fixed seed).

slice.tsv, one case per line, tab-separated:
    shape  slice_text  ok  out_shape  flat_indices
    shape  slice_text  err kind
  shape / out_shape: comma-separated dimensions, '-' for a scalar (rank 0);
  flat_indices: the C-order element indices (of np.arange(size).reshape(shape))
  that NumPy's a[slice] returns, comma-separated, '-' when empty;
  kind: index_range | step_zero | too_many.
npy.tsv: dtype_name  shape  header_hex   (shape tokens may be VALUE*COUNT)
"""
import io
import os
import random

import numpy as np
from numpy.lib import format as npformat

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_item(text):
    if ':' not in text:
        return int(text)
    parts = text.split(':')
    vals = [int(p) if p != '' else None for p in parts]
    while len(vals) < 3:
        vals.append(None)
    return slice(*vals)


def numpy_result(shape, text):
    a = np.arange(int(np.prod(shape, dtype=np.int64)), dtype=np.int64).reshape(shape)
    index = tuple(parse_item(t) for t in text.split(',')) if text != '' else ()
    try:
        r = a[index]
    except IndexError as e:
        msg = str(e)
        if 'too many indices' in msg:
            return ('err', 'too_many')
        if 'out of bounds' in msg:
            return ('err', 'index_range')
        raise
    except ValueError as e:
        if 'step cannot be zero' in str(e):
            return ('err', 'step_zero')
        raise
    r = np.asarray(r)
    return ('ok', r.shape, [int(x) for x in r.ravel()])


def dims_text(dims):
    return ','.join(str(d) for d in dims) if len(dims) else '-'


def random_bound(rng, n):
    choice = rng.random()
    if choice < 0.15:
        return ''
    if choice < 0.25:
        return str(rng.choice([-n - 3, n + 3, -1000, 1000, 10**12, -10**12]))
    return str(rng.randint(-n - 2, n + 2))


def random_item(rng, n, allow_error):
    kind = rng.random()
    if kind < 0.25:
        if allow_error and rng.random() < 0.4:
            return str(rng.choice([n, -n - 1, n + 5, 10**15]))
        if n == 0:
            return ':'
        return str(rng.randint(-n, n - 1))
    if kind < 0.35:
        return ':'
    start = random_bound(rng, n)
    stop = random_bound(rng, n)
    if rng.random() < 0.5:
        return start + ':' + stop
    step_choice = rng.random()
    if step_choice < 0.1:
        step = ''
    elif allow_error and step_choice < 0.25:
        step = '0'
    elif step_choice < 0.55:
        step = str(rng.choice([-1, -2, -3, -5]))
    else:
        step = str(rng.choice([1, 2, 3, 4, 7]))
    return start + ':' + stop + ':' + step


def random_shape(rng):
    rank = rng.choice([0, 1, 1, 2, 2, 2, 3, 3, 4, 5])
    limit = {0: 1, 1: 40, 2: 12, 3: 6, 4: 4, 5: 3}[rank]
    shape = []
    for _ in range(rank):
        if rng.random() < 0.07:
            shape.append(0)
        elif rng.random() < 0.1:
            shape.append(1)
        else:
            shape.append(rng.randint(1, limit))
    return tuple(shape)


def slice_cases():
    rng = random.Random(20240611)
    cases = []
    fixed = [
        ((), ''), ((), '0'), ((), ':'),
        ((5,), ''), ((5,), ':'), ((5,), '::'), ((5,), '::-1'), ((5,), '-1'), ((5,), '-5'),
        ((5,), '5'), ((5,), '-6'), ((5,), '1::0'), ((5,), '10:'), ((5,), '-10:'),
        ((5,), ':-10:-1'), ((5,), '3:1'), ((5,), '3:1:-1'), ((5,), '0:0'), ((0,), ':'),
        ((0,), '::-1'), ((0,), '0'), ((2, 3), '1'), ((2, 3), '1,2'), ((2, 3), '1,2,0'),
        ((2, 3), ':,1'), ((2, 3), '::-1,::-1'), ((3, 4), '7'), ((3, 4), '0,7'),
        ((3, 4), '0,-5'), ((2, 3, 4, 5, 6), '1,:,::2,-1,1:5:3'),
        ((2, 3, 4, 5, 6), '::-1,1:,2,::-2'), ((2, 3, 4, 5, 6), '-1,-1,-1,-1,-1'),
        ((4, 0, 3), '1:3'), ((4, 0, 3), '1,:,2'), ((6, 4), '1:4'), ((6, 4), '1:4,:'),
        ((6, 4), '2,1:3'), ((6, 4), '1:4,1:3'), ((6, 4), '9223372036854775807:'),
        ((6, 4), '-9223372036854775807:'), ((6, 4), '::9223372036854775807'),
        ((6, 4), '::-9223372036854775807'), ((1, 1, 5), '0,0,::-1'), ((1, 5, 1), '::-1,::-1,::-1'),
    ]
    for shape, text in fixed:
        cases.append((shape, text))
    for _ in range(2500):
        shape = random_shape(rng)
        rank = len(shape)
        allow_error = rng.random() < 0.2
        count = rng.randint(0, rank)
        if allow_error and rng.random() < 0.2:
            count = rank + rng.randint(1, 2)
        items = [random_item(rng, shape[i] if i < rank else 3, allow_error) for i in range(count)]
        cases.append((shape, ','.join(items)))
    lines = []
    for shape, text in cases:
        result = numpy_result(shape, text)
        if result[0] == 'err':
            lines.append('%s\t%s\terr\t%s' % (dims_text(shape), text, result[1]))
        else:
            _, out_shape, flat = result
            lines.append('%s\t%s\tok\t%s\t%s' % (dims_text(shape), text, dims_text(out_shape),
                                                 ','.join(map(str, flat)) if flat else '-'))
    return lines


NPY_DTYPES = [
    ('BOOL', '|b1'), ('U8', '|u1'), ('I8', '|i1'), ('I16', '<i2'), ('U16', '<u2'), ('F16', '<f2'),
    ('I32', '<i4'), ('U32', '<u4'), ('F32', '<f4'), ('I64', '<i8'), ('U64', '<u8'), ('F64', '<f8'),
    ('C64', '<c8'),
]


def npy_header(descr, shape):
    # The header numpy.save writes (np.save -> write_array with version=None).
    fp = io.BytesIO()
    npformat._write_array_header(fp, {'descr': descr, 'fortran_order': False, 'shape': shape}, None)
    return fp.getvalue()


def npy_cases():
    rng = random.Random(7)
    shapes = [(), (5,), (2, 3), (0,), (0, 7), (1, 1, 1), (2**64 - 1,), (10**18, 3),
              (3, 10**20 // 10**3), tuple(range(1, 33)), (7,) * 64]
    for _ in range(20):
        rank = rng.randint(0, 9)
        shapes.append(tuple(rng.choice([0, 1, 2, 17, 1000, 65536, 2**31, 2**63]) for _ in range(rank)))
    lines = []
    for i, (name, descr) in enumerate(NPY_DTYPES):
        for j, shape in enumerate(shapes):
            if (i + j) % 3 and len(shape) > 3:
                continue
            lines.append('%s\t%s\t%s' % (name, dims_text(shape), npy_header(descr, shape).hex()))
    # version 2.0: a dict longer than 65535 bytes (22 bytes per 20-digit dimension)
    big = (2**64 - 1,) * 3000
    header = npy_header('<f4', big)
    assert header[6] == 2
    lines.append('F32\t%d*3000\t%s' % (2**64 - 1, header.hex()))
    return lines


def main():
    with open(os.path.join(HERE, 'slice.tsv'), 'w') as f:
        f.write('\n'.join(slice_cases()) + '\n')
    with open(os.path.join(HERE, 'npy.tsv'), 'w') as f:
        f.write('\n'.join(npy_cases()) + '\n')


if __name__ == '__main__':
    main()
