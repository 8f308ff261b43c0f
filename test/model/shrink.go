package model

// Shrink looks for the shortest prefix of s that fails too, as fails
// (which runs a schedule and reports whether it broke an invariant) says,
// in at most tries runs: a bisection of the prefix's length, since a
// schedule's steps only add writers and faults to what came before. A
// run is not repeatable to the millisecond, so the prefix found is the
// shortest that failed once.
func Shrink(s Schedule, tries int, fails func(Schedule) bool) Schedule {
	lo, hi := 0, len(s.Steps)
	for ; tries > 0 && hi-lo > 1; tries-- {
		mid := (lo + hi) / 2
		if fails(s.Prefix(mid)) {
			hi = mid
		} else {
			lo = mid
		}
	}
	return s.Prefix(hi)
}
