module andes.example/coopgo

go 1.24

require andes.dev/guest v0.0.0

// The guest SDK from this repository: the build needs no network.
replace andes.dev/guest => ../../../../guest-sdk/go
