//go:build cgo

package main

// indexOffHeap says whether the key index's cache and memtables live
// outside the Go heap: pebble allocates them with C's malloc when cgo is
// on (the release images build without it).
const indexOffHeap = true
