//go:build race

package agent

// raceAllocSlack: under the race detector sync.Pool drops items at random,
// so pooled buffers (encoding/json's) are sometimes allocated afresh.
const raceAllocSlack = 1
