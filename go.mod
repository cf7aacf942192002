module github.com/prismsbi/prism

go 1.26.8
