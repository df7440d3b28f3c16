# fish completion for fdl. Load it with:  fdl completions fish | source
# Candidates come from `fdl __complete`, which reads the manifest each time.
function __fdl_complete
    set -l tokens (commandline -opc)
    set -e tokens[1]
    set -l current (commandline -ct)
    set -l reply (command fdl __complete fish -- $tokens "$current" 2>/dev/null)
    switch "$reply[1]"
        case ':files'
            __fish_complete_path "$current"
        case ':dirs'
            __fish_complete_directories "$current"
        case '*'
            printf '%s\n' $reply
    end
end
complete -c fdl -f -a '(__fdl_complete)'
