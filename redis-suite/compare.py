#!/usr/bin/env python3
"""Compare one unit's runtest output (TERM=dumb) on redis-server and celld.

usage: compare.py UNIT REDIS_OUT REDIS_RC CELLD_OUT CELLD_RC

A difference is a test reported "[ok]" by the redis-server run and not by the
celld run, counted by name as a multiset: celld reported it "[err]" (the
message is shown), or never got to it (an exception, a timeout, or a setup
step outside any test that made --durable skip the rest of its block).
Prints "DIFF<TAB>unit<TAB>test<TAB>why" lines, then
"UNIT<TAB>unit<TAB>redis_ok<TAB>redis_status<TAB>celld_ok<TAB>celld_status<TAB>differences".
"""
import collections
import re
import sys

OK = re.compile(r'^\[ok\]: (.*) \(\d+ ms\)$')
ERR = re.compile(r'^\[err\]: (.*) in tests/unit/\S+\.tcl$')
NEXT = re.compile(r'^\[(ok|err|exception|skip|ignore|ready|TIMEOUT|\d+/\d+ done)\]')


def read(path, rc):
    try:
        lines = open(path, encoding='utf-8', errors='replace').read().split('\n')
    except OSError:
        lines = []
    ok, err = collections.Counter(), collections.defaultdict(list)
    exception, aborted, finished = None, 0, False
    i = 0
    while i < len(lines):
        line = lines[i]
        m = OK.match(line)
        if m:
            ok[m.group(1)] += 1
        elif line.startswith('[err]: '):
            body = []
            j = i + 1
            while j < len(lines) and not NEXT.match(lines[j]):
                if lines[j].strip():
                    body.append(lines[j].strip())
                j += 1
            m = ERR.match(line)
            if m:
                err[m.group(1)].append(body[0] if body else '')
            else:
                aborted += 1  # a setup step failed: the block was skipped
            i = j
            continue
        elif line.startswith('[exception]: '):
            exception = line[len('[exception]: '):].strip() or (lines[i + 1].strip() if i + 1 < len(lines) else '')
        elif re.match(r'^\[\d+/\d+ done\]', line) or 'All tests passed' in line \
                or line.startswith('!!! WARNING The following tests failed'):
            finished = True
        i += 1
    if rc in (124, 137):
        status = 'timed out'
    elif exception:
        status = 'exception: ' + exception[:80]
    elif not finished:
        status = 'stopped early'
    else:
        status = 'finished'
    if aborted:
        status += ', %d block(s) aborted' % aborted
    return ok, err, status


def main():
    unit, rout, rrc, cout, crc = sys.argv[1:6]
    rok, _, rstatus = read(rout, int(rrc))
    cok, cerr, cstatus = read(cout, int(crc))
    n = 0
    for name, count in rok.items():
        for _ in range(count - cok.get(name, 0)):
            errs = cerr.get(name)
            why = errs.pop(0) if errs else 'not reached on celld (' + cstatus + ')'
            n += 1
            print('DIFF\t%s\t%s\t%s' % (unit, name, (why or 'failed').replace('\t', ' ')[:200]))
    print('UNIT\t%s\t%d\t%s\t%d\t%s\t%d' % (unit, sum(rok.values()), rstatus, sum(cok.values()), cstatus, n))


if __name__ == '__main__':
    main()
