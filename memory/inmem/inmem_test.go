package inmem_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/agentry/agentry/memory"
	"github.com/agentry/agentry/memory/inmem"
	"github.com/agentry/agentry/memory/memorytest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestInMemory(t *testing.T) {
	memorytest.Run(t, func(*testing.T) memory.Backend { return inmem.New() })
}

func BenchmarkInMemory(b *testing.B) {
	memorytest.Bench(b, func(*testing.B) memory.Backend { return inmem.New() })
}
