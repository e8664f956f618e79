module andes.example/guests

go 1.24
