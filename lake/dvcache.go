package lake

import (
	"sync"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table/dv"
)

// Deletion vectors kept in memory after an epoch writes them.
//
// An epoch that deletes a row of a data file that already has a vector
// writes a new vector holding the old positions too, so it reads the old
// one: one ranged read per data file, one after the other. On a finely
// partitioned table, where nearly every epoch replaces the vector of nearly
// every data file, that is thousands of reads an epoch; on S3 each is a
// request. The vector being replaced is nearly always one an earlier
// epoch of this process wrote, so the process keeps what it writes: the
// bitmap of each vector, by Puffin file and offset (a Puffin file is never
// rewritten, so the key names the bytes), first in first out within a
// byte budget shared by the process's tables. A vector another writer
// committed, or one that fell out of the budget, is read as before.

// dvKey names a vector's bytes: its Puffin file and offset.
type dvBlobKey struct {
	path   string
	offset int64
}

// dvCache is the vectors this process wrote, by Puffin file and offset.
// Its bitmaps are never changed once added: callers only read them.
type dvCache struct {
	mu     sync.Mutex
	budget int64
	bytes  int64
	m      map[dvBlobKey]*dv.RoaringPositionBitmap
	sizes  map[dvBlobKey]int64
	fifo   []dvBlobKey // in the order added; keys removed since are skipped
}

func newDVCache(budget int64) *dvCache {
	return &dvCache{budget: budget, m: map[dvBlobKey]*dv.RoaringPositionBitmap{}, sizes: map[dvBlobKey]int64{}}
}

// blobKey returns the key of the vector del and whether it has one (a
// vector without an offset is read through the Puffin footer).
func blobKey(del iceberg.DataFile) (dvBlobKey, bool) {
	off := del.ContentOffset()
	if off == nil {
		return dvBlobKey{}, false
	}
	return dvBlobKey{path: del.FilePath(), offset: *off}, true
}

// dvMemory estimates the memory a cached vector takes: its serialized size
// plus the bitmap's and the map's overhead.
func dvMemory(del iceberg.DataFile) int64 {
	size := int64(0)
	if s := del.ContentSizeInBytes(); s != nil {
		size = *s
	}
	return 2*size + 256
}

// get returns the bitmap of del, nil when it is not kept.
func (c *dvCache) get(del iceberg.DataFile) *dv.RoaringPositionBitmap {
	if c == nil {
		return nil
	}
	k, ok := blobKey(del)
	if !ok {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// put keeps bm as the bitmap of the vector del, which was just written,
// making room by dropping the oldest vectors kept.
func (c *dvCache) put(del iceberg.DataFile, bm *dv.RoaringPositionBitmap) {
	k, ok := blobKey(del)
	if c == nil || !ok {
		return
	}
	size := dvMemory(del)
	c.mu.Lock()
	defer c.mu.Unlock()
	if size > c.budget {
		return
	}
	if _, dup := c.m[k]; dup {
		return
	}
	for c.bytes+size > c.budget && len(c.fifo) > 0 {
		c.dropLocked(c.fifo[0])
		c.fifo = c.fifo[1:]
	}
	c.m[k], c.sizes[k] = bm, size
	c.bytes += size
	c.fifo = append(c.fifo, k)
	if len(c.fifo) > 2*len(c.m)+1024 {
		// Keys dropped out of order (superseded vectors) are still in
		// the queue: compact it.
		live := c.fifo[:0]
		for _, k := range c.fifo {
			if _, ok := c.m[k]; ok {
				live = append(live, k)
			}
		}
		c.fifo = live
	}
}

// drop forgets the vectors dels (superseded: no snapshot to come reads them).
func (c *dvCache) drop(dels []iceberg.DataFile) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, del := range dels {
		if k, ok := blobKey(del); ok {
			c.dropLocked(k)
		}
	}
}

func (c *dvCache) dropLocked(k dvBlobKey) {
	if size, ok := c.sizes[k]; ok {
		c.bytes -= size
		delete(c.m, k)
		delete(c.sizes, k)
	}
}
