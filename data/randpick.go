package data

import "math/rand/v2"

// pickDistinct calls pick with count distinct random indexes of [0, n)
// (0 < count < n), as Redis's HRANDFIELD and ZRANDMEMBER choose them:
// below a third of n, random indexes with repeats rejected (Redis's
// case 4, O(count) picks); else a partial Fisher-Yates over the indexes
// (case 3, O(n) for the permutation). Called by one command at a time;
// allocates the rejection set or the permutation.
func pickDistinct(n, count int, pick func(i int)) {
	if count*3 < n {
		picked := make(map[int]struct{}, count)
		for len(picked) < count {
			i := rand.IntN(n)
			if _, dup := picked[i]; dup {
				continue
			}
			picked[i] = struct{}{}
			pick(i)
		}
		return
	}
	perm := make([]int32, n)
	for i := range perm {
		perm[i] = int32(i)
	}
	for i := range count {
		j := i + rand.IntN(n-i)
		perm[i], perm[j] = perm[j], perm[i]
		pick(int(perm[i]))
	}
}
