package server

import "math"

// Keys of the commands whose key count is an argument (ZUNIONSTORE dst
// numkeys key..., ZUNION numkeys key..., LMPOP numkeys key..., ...):
// registered with a keynum key spec (Command.KeySpecs), they find their
// keys the way Redis's getkeys procs for them do (genericGetKeys in
// db.c), for COMMAND GETKEYS, cluster routing, tracking and WATCH. Read
// only after init; nothing here is on CL.THROTTLE's path.

// keynumKeys are the argument positions of a keynum command: numkeys at
// count, the keys from first every step, and, when store > 0, one more key
// (the destination) at store.
type keynumKeys struct {
	store, count, first, step int
}

// keynumOf derives a command's keynumKeys from its registered key specs:
// the keynum spec gives count and first, a range spec of one key gives
// the destination. It returns nil when no spec is keynum.
func keynumOf(specs []keySpec) *keynumKeys {
	var k *keynumKeys
	store := 0
	for _, ks := range specs {
		switch {
		case ks.keynum:
			step := max(ks.keyStep, 1)
			k = &keynumKeys{count: ks.index + ks.keynumIdx, first: ks.index + ks.firstKey, step: step}
		case ks.lastKey == 0:
			store = ks.index
		}
	}
	if k != nil {
		k.store = store
	}
	return k
}

// each calls fn for the keys of args (the command name first) as Redis
// 7.0's getKeysFromCommandWithSpecs finds them. First by the key specs:
// when numkeys is a positive integer (string2ll) and every key it counts
// is there, the destination, then the numkeys keys (LMPOP 3 a b LEFT
// counts LEFT). Otherwise by the command's getkeys proc (genericGetKeys):
// numkeys read like C's atoi ("2x" is 2), none at all when it is below 1
// or more than the arguments after it, else the numkeys keys, then the
// destination. written asks for the keys the command may write: the
// destination alone when there is one, else all of them (LMPOP pops from
// any of its keys; a read-only command's keys are all read).
func (k *keynumKeys) each(args [][]byte, written bool, fn func([]byte)) {
	if k.count >= len(args) {
		return
	}
	num, ok := parseRedisInt(args[k.count])
	bySpec := ok && num > 0 && num <= int64((len(args)-1-k.first)/k.step+1)
	if !bySpec {
		num = atoi(args[k.count])
		if num < 1 || num > int64((len(args)-k.first)/k.step) {
			return
		}
	}
	if k.store > 0 && (bySpec || written) {
		fn(args[k.store]) // k.store < k.count < len(args)
	}
	if k.store > 0 && written {
		return
	}
	for i := range int(num) {
		fn(args[k.first+i*k.step])
	}
	if k.store > 0 && !bySpec {
		fn(args[k.store])
	}
}

// atoi is C's atoi: leading blanks, a sign, then as many digits as there
// are (0 when none); it saturates instead of overflowing.
func atoi(b []byte) int64 {
	i := 0
	for i < len(b) && (b[i] == ' ' || (b[i] >= '\t' && b[i] <= '\r')) {
		i++
	}
	neg := false
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	var n int64
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if n > (math.MaxInt64-9)/10 {
			n = math.MaxInt64 / 10
		}
		n = n*10 + int64(b[i]-'0')
	}
	if neg {
		return -n
	}
	return n
}

// legacyRange is the first key, last key and step COMMAND INFO reports for
// a command with these key specs, as Redis 7's
// populateCommandLegacyRangeSpec derives them: the span of its index/range
// specs while they are contiguous with step 1, 0 0 0 when there are none.
func legacyRange(specs []keySpec) (first, last, step int) {
	if len(specs) == 1 && !specs[0].keynum {
		ks := specs[0]
		last = ks.index + ks.lastKey
		if ks.lastKey < 0 {
			last = ks.lastKey
		}
		return ks.index, last, ks.keyStep
	}
	first, lastAbs, prev := math.MaxInt, 0, 0
	for _, ks := range specs {
		if ks.keynum {
			continue
		}
		if ks.keyStep != 1 || (prev != 0 && prev != ks.index-1) {
			return 0, 0, 0 // not one contiguous range
		}
		first = min(first, ks.index)
		abs := ks.lastKey
		if abs >= 0 {
			abs += ks.index
		}
		if uint(abs) > uint(lastAbs) { // Redis compares unsigned: -1 is the largest
			lastAbs = abs
		}
		prev = lastAbs
	}
	if first == math.MaxInt {
		return 0, 0, 0
	}
	return first, lastAbs, 1
}
