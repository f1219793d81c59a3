package job

import "testing"

func TestStoredDurability(t *testing.T) {
	tests := []struct {
		d, own Durability
		want   Durability
		kept   bool
	}{
		{"", DurabilityFull, DurabilityFull, true},
		{"", DurabilityMemory, DurabilityMemory, true},
		{DurabilityFull, DurabilityFull, DurabilityFull, true},
		{DurabilityProcess, DurabilityFull, DurabilityProcess, true},
		{DurabilityMemory, DurabilityFull, DurabilityMemory, false},
		{DurabilityMemory, DurabilityMemory, DurabilityMemory, true},
		{DurabilityFull, DurabilityMemory, DurabilityFull, false},
		{DurabilityProcess, DurabilityMemory, DurabilityProcess, false},
		{"fast", DurabilityFull, "fast", false},
	}
	for _, tt := range tests {
		got, kept := StoredDurability(tt.d, tt.own)
		if got != tt.want || kept != tt.kept {
			t.Errorf("StoredDurability(%q, %q) = %q, %v; want %q, %v", tt.d, tt.own, got, kept, tt.want, tt.kept)
		}
	}
}
