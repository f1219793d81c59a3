package main

var cliCommands = map[string]func([]string) int{}
