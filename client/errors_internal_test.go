package client

import (
	"encoding/json"
	"os"
	"testing"
)

// Every error code of the contract has its sentinel here, and no code
// here is unknown to the contract.
func TestCodesCoverTheContract(t *testing.T) {
	data, err := os.ReadFile("../api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas struct {
				ErrorCode struct {
					Enum []string `json:"enum"`
				} `json:"ErrorCode"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	enum := doc.Components.Schemas.ErrorCode.Enum
	if len(enum) == 0 {
		t.Fatal("no ErrorCode enum in the OpenAPI document")
	}
	inDoc := make(map[string]bool)
	for _, c := range enum {
		inDoc[c] = true
		if _, ok := codes[c]; !ok {
			t.Errorf("code %q of the contract has no sentinel in the client", c)
		}
	}
	for c := range codes {
		if !inDoc[c] {
			t.Errorf("client code %q is not in the contract", c)
		}
	}
}
