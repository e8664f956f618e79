module andes.dev/guest

go 1.24
