package persist

// NoteUnloggedDeletes counts n keys that left the state without a delete
// entry toward BaseDue's "most of the base deleted" fold, as if n delete
// entries had been written: the store writes none for a key that expired
// with its last record already handed over (store/expire.go), since that
// record carries the expiry, but the base may still hold the key, and
// only a fold removes it from disk. Safe for concurrent use; takes the
// log's mutex briefly (Write holds it across a write, WriteBase only at
// its cut and its end).
func (db *DB) NoteUnloggedDeletes(n int64) {
	if n <= 0 {
		return
	}
	db.mu.Lock()
	db.mu.logDeletes += n
	db.logDeletes.Store(db.mu.logDeletes)
	db.mu.Unlock()
}
