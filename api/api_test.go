package api_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spoolq/spool/api"
)

// protocolPath is the prose contract the document must agree with.
const protocolPath = "../docs/protocol.md"

// document decodes api.OpenAPI, failing the test if it is not a JSON object.
func document(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(api.OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json is not a JSON object: %v", err)
	}
	return doc
}

// protocol returns the text of docs/protocol.md.
func protocol(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(protocolPath)
	if err != nil {
		t.Fatalf("read protocol: %v", err)
	}
	return string(data)
}

func TestDocumentIsOpenAPI3(t *testing.T) {
	t.Parallel()
	if err := checkDuplicateKeys(json.NewDecoder(bytes.NewReader(api.OpenAPI)), "$"); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	doc := document(t)
	version, _ := doc["openapi"].(string)
	if !strings.HasPrefix(version, "3.") {
		t.Fatalf("openapi = %q, want a 3.x version", version)
	}
	info, _ := doc["info"].(map[string]any)
	if info["version"] != "1.0.0" || info["title"] == nil {
		t.Fatalf("info = %v, want a title and version 1.0.0", info)
	}
	if paths, _ := doc["paths"].(map[string]any); len(paths) == 0 {
		t.Fatal("the document has no paths")
	}
}

// checkDuplicateKeys reads one JSON value from dec and fails on an object
// that repeats a key, which encoding/json would otherwise accept silently
// by keeping the last one.
func checkDuplicateKeys(dec *json.Decoder, at string) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%s: %w", at, err)
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return fmt.Errorf("%s: %w", at, err)
			}
			key := tok.(string)
			if seen[key] {
				return fmt.Errorf("%s: duplicate key %q", at, key)
			}
			seen[key] = true
			if err := checkDuplicateKeys(dec, at+"."+key); err != nil {
				return err
			}
		}
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := checkDuplicateKeys(dec, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
	default:
		return nil
	}
	_, err = dec.Token() // the closing delimiter
	return err
}

// routePattern finds routes written in the protocol as code spans such as
// "`POST /v1/jobs/{id}/ack`" or "`GET /v1/jobs?queue=&state=`".
var routePattern = regexp.MustCompile("`(GET|POST|PUT|PATCH|DELETE) (/[^`?\\s]*)(?:\\?[^`]*)?`")

// placeholder matches a path parameter; routes compare with every parameter
// written as "{}", so a renamed parameter is not a different route.
var placeholder = regexp.MustCompile(`\{[^{}/]+\}`)

// protocolRoutes returns every "METHOD /path" the protocol names. A segment
// written with alternatives, as in "/v1/jobs/ack|fail", stands for one route
// per alternative.
func protocolRoutes(text string) map[string]bool {
	routes := map[string]bool{}
	for _, m := range routePattern.FindAllStringSubmatch(text, -1) {
		for _, path := range expandAlternatives(m[2]) {
			routes[m[1]+" "+placeholder.ReplaceAllString(path, "{}")] = true
		}
	}
	return routes
}

func expandAlternatives(path string) []string {
	out := []string{""}
	for i, seg := range strings.Split(path, "/") {
		var next []string
		for _, prefix := range out {
			for _, alt := range strings.Split(seg, "|") {
				if i == 0 {
					next = append(next, alt)
				} else {
					next = append(next, prefix+"/"+alt)
				}
			}
		}
		out = next
	}
	return out
}

var httpMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// operations returns every operation of the document keyed "METHOD /path".
func operations(t *testing.T, doc map[string]any) map[string]map[string]any {
	t.Helper()
	ops := map[string]map[string]any{}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		item, ok := item.(map[string]any)
		if !ok {
			t.Fatalf("path %s is not an object", path)
		}
		for method, op := range item {
			if !slices.Contains(httpMethods, method) {
				continue
			}
			op, ok := op.(map[string]any)
			if !ok {
				t.Fatalf("%s %s is not an object", method, path)
			}
			ops[strings.ToUpper(method)+" "+path] = op
		}
	}
	return ops
}

func TestDocumentHasEveryRouteOfTheProtocol(t *testing.T) {
	t.Parallel()
	want := protocolRoutes(protocol(t))
	if len(want) < 10 {
		t.Fatalf("found only %d routes in %s; has the way routes are written changed?", len(want), protocolPath)
	}
	have := map[string]bool{}
	for route := range operations(t, document(t)) {
		have[placeholder.ReplaceAllString(route, "{}")] = true
	}
	for route := range want {
		if !have[route] {
			t.Errorf("%s is in %s but not in openapi.json", route, protocolPath)
		}
	}
	for route := range have {
		if !want[route] {
			t.Errorf("%s is in openapi.json but not in %s", route, protocolPath)
		}
	}
}

func TestProtocolRoutesParse(t *testing.T) {
	t.Parallel()
	text := "`POST /v1/jobs/ack`, `POST /v1/jobs/fail`,\n`GET /v1/jobs?queue=&limit=` and `POST /v1/jobs/{id}/ack|fail` or `/extend`"
	got := protocolRoutes(text)
	want := []string{"POST /v1/jobs/ack", "POST /v1/jobs/fail", "GET /v1/jobs", "POST /v1/jobs/{}/ack", "POST /v1/jobs/{}/fail"}
	if len(got) != len(want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for _, route := range want {
		if !got[route] {
			t.Errorf("%s not found in %v", route, got)
		}
	}
}

// resolve follows a local reference such as "#/components/schemas/Job".
func resolve(doc any, ref string) (any, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, errors.New("not a local reference")
	}
	cur := doc
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch node := cur.(type) {
		case map[string]any:
			next, ok := node[tok]
			if !ok {
				return nil, fmt.Errorf("no %q", tok)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(node) {
				return nil, fmt.Errorf("no index %q", tok)
			}
			cur = node[i]
		default:
			return nil, fmt.Errorf("%q goes into a scalar", tok)
		}
	}
	return cur, nil
}

// walk calls visit for every object in v, with its location.
func walk(v any, at string, visit func(at string, obj map[string]any)) {
	switch node := v.(type) {
	case map[string]any:
		visit(at, node)
		for k, child := range node {
			walk(child, at+"/"+strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1"), visit)
		}
	case []any:
		for i, child := range node {
			walk(child, fmt.Sprintf("%s/%d", at, i), visit)
		}
	}
}

func TestEveryRefResolves(t *testing.T) {
	t.Parallel()
	doc := document(t)
	used := map[string]bool{}
	walk(doc, "#", func(at string, obj map[string]any) {
		ref, ok := obj["$ref"].(string)
		if !ok {
			return
		}
		if _, err := resolve(doc, ref); err != nil {
			t.Errorf("%s: $ref %q does not resolve: %v", at, ref, err)
		}
		used[ref] = true
	})
	components, _ := doc["components"].(map[string]any)
	for _, kind := range []string{"schemas", "responses", "parameters"} {
		entries, _ := components[kind].(map[string]any)
		for name := range entries {
			if ref := "#/components/" + kind + "/" + name; !used[ref] {
				t.Errorf("%s is never referenced", ref)
			}
		}
	}
}

// errorTableRow matches a row of the protocol's error table: "| `code` | 400 |".
var errorTableRow = regexp.MustCompile("(?m)^\\|\\s*`([a-z_]+)`\\s*\\|\\s*(\\d{3})\\s*\\|")

func TestErrorCodesMatchTheProtocol(t *testing.T) {
	t.Parallel()
	rows := errorTableRow.FindAllStringSubmatch(protocol(t), -1)
	if len(rows) == 0 {
		t.Fatalf("no error table found in %s", protocolPath)
	}
	doc := document(t)
	codeSchema, err := resolve(doc, "#/components/schemas/ErrorCode")
	if err != nil {
		t.Fatalf("ErrorCode schema: %v", err)
	}
	var enum []string
	for _, v := range codeSchema.(map[string]any)["enum"].([]any) {
		enum = append(enum, v.(string))
	}
	statuses := map[string]bool{}
	var table []string
	for _, row := range rows {
		table = append(table, row[1])
		statuses[row[2]] = true
		if !slices.Contains(enum, row[1]) {
			t.Errorf("error code %s (%s) is in %s but not in the ErrorCode enum", row[1], row[2], protocolPath)
		}
	}
	for _, code := range enum {
		if !slices.Contains(table, code) {
			t.Errorf("error code %s is in the ErrorCode enum but not in %s", code, protocolPath)
		}
	}
	// Every error answer of every operation has a status from the table
	// and the Error body.
	for route, op := range operations(t, doc) {
		responses, _ := op["responses"].(map[string]any)
		for status, resp := range responses {
			if n, err := strconv.Atoi(status); err == nil && n < 400 {
				continue
			}
			if status != "default" && !statuses[status] {
				t.Errorf("%s answers %s, a status no error code has", route, status)
			}
			if ref, ok := resp.(map[string]any)["$ref"].(string); ok {
				if resp, err = resolve(doc, ref); err != nil {
					continue // reported by TestEveryRefResolves
				}
			}
			content, _ := resp.(map[string]any)["content"].(map[string]any)
			media, _ := content["application/json"].(map[string]any)
			schema, _ := media["schema"].(map[string]any)
			if schema["$ref"] != "#/components/schemas/Error" {
				t.Errorf("%s %s: body is %v, want the Error schema", route, status, schema)
			}
		}
	}
}

var camelCase = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*$`)

func TestOperations(t *testing.T) {
	t.Parallel()
	doc := document(t)
	ids := map[string]string{}
	for route, op := range operations(t, doc) {
		id, _ := op["operationId"].(string)
		if !camelCase.MatchString(id) {
			t.Errorf("%s: operationId %q is not camelCase", route, id)
		}
		if other, dup := ids[id]; dup {
			t.Errorf("operationId %s is used by %s and %s", id, route, other)
		}
		ids[id] = route
		responses, _ := op["responses"].(map[string]any)
		success := false
		for status := range responses {
			// 101: the stream's upgrade succeeds by switching protocols.
			success = success || strings.HasPrefix(status, "2") || status == "101"
		}
		if !success {
			t.Errorf("%s has no 2xx (or 101) answer", route)
		}
		body, ok := op["requestBody"].(map[string]any)
		if !ok {
			continue
		}
		for _, status := range []string{"400", "413"} {
			if responses[status] == nil {
				t.Errorf("%s takes a body but does not list %s", route, status)
			}
		}
		content, _ := body["content"].(map[string]any)
		media, _ := content["application/json"].(map[string]any)
		checkClosed(t, doc, media["schema"], route+" body", map[string]bool{})
	}
}

// checkClosed fails the test for every object schema within schema that
// allows unknown properties: the server rejects unknown fields, so request
// bodies must say so.
func checkClosed(t *testing.T, doc, schema any, at string, seen map[string]bool) {
	t.Helper()
	node, ok := schema.(map[string]any)
	if !ok {
		return
	}
	if ref, ok := node["$ref"].(string); ok {
		if seen[ref] {
			return
		}
		seen[ref] = true
		target, err := resolve(doc, ref)
		if err != nil {
			return // reported by TestEveryRefResolves
		}
		checkClosed(t, doc, target, ref, seen)
		return
	}
	if props, ok := node["properties"].(map[string]any); ok {
		if node["additionalProperties"] != false {
			t.Errorf("%s: an object schema in a request body lacks additionalProperties: false", at)
		}
		for name, prop := range props {
			checkClosed(t, doc, prop, at+"."+name, seen)
		}
	}
	checkClosed(t, doc, node["items"], at+"[]", seen)
	for _, key := range []string{"allOf", "oneOf", "anyOf"} {
		list, _ := node[key].([]any)
		for _, sub := range list {
			checkClosed(t, doc, sub, at, seen)
		}
	}
}
