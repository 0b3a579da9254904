//go:build !race

package agent

const raceAllocSlack = 0
