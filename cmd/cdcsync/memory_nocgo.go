//go:build !cgo

package main

// indexOffHeap says whether the key index's cache and memtables live
// outside the Go heap: without cgo pebble allocates them in it.
const indexOffHeap = false
