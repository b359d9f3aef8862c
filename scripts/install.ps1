<#
.SYNOPSIS
Installs the continuity binary (Continuity, the MCP memory server) on Windows x86_64,
for this user, without administrator rights.

.DESCRIPTION
Reads the release's SHA256SUMS, downloads continuity-<version>-x86_64-pc-windows-msvc.zip,
checks its SHA-256 (a mismatch installs nothing), unpacks it in a temporary folder
(removed afterwards), checks that the binary runs, moves it into the bin folder and adds
that folder to the user's PATH. Runs in Windows PowerShell 5.1 and PowerShell 7.

  irm https://github.com/continuity-hq/continuity/releases/latest/download/install.ps1 | iex

With parameters:

  & ([scriptblock]::Create((irm https://github.com/continuity-hq/continuity/releases/latest/download/install.ps1))) -Version 0.1.0

From a checkout: powershell -ExecutionPolicy Bypass -File scripts\install.ps1 -BinDir C:\tools

Environment (parameters win): CONTINUITY_INSTALL_BASE_URL, CONTINUITY_INSTALL_DIR,
CONTINUITY_INSTALL_VERSION.

.PARAMETER Version
The release to install (0.1.0 or v0.1.0); default: the latest release.

.PARAMETER BaseUrl
Where SHA256SUMS and the archive are (a mirror of a release's assets). Default:
https://github.com/continuity-hq/continuity/releases/latest/download, or with -Version V
https://github.com/continuity-hq/continuity/releases/download/vV.

.PARAMETER BinDir
The folder to install continuity.exe into; default: $env:LOCALAPPDATA\Programs\continuity\bin.

.PARAMETER NoModifyPath
Leave the user's PATH alone.
#>
[CmdletBinding()]
param(
    [string] $Version = $env:CONTINUITY_INSTALL_VERSION,
    [string] $BaseUrl = $env:CONTINUITY_INSTALL_BASE_URL,
    [string] $BinDir = $env:CONTINUITY_INSTALL_DIR,
    [switch] $NoModifyPath
)

function Install-Continuity {
    [CmdletBinding()]
    param(
        [string] $Version,
        [string] $BaseUrl,
        [string] $BinDir,
        [switch] $NoModifyPath
    )
    # Inside the function: `irm | iex` runs in the caller's session, whose preferences
    # must not change.
    $ErrorActionPreference = 'Stop'
    $ProgressPreference = 'SilentlyContinue' # Windows PowerShell's progress bar slows downloads tenfold
    Set-StrictMode -Version 2.0

    $repoUrl = 'https://github.com/continuity-hq/continuity'
    $fromSource = "cargo install --locked --git $repoUrl continuity"
    $target = 'x86_64-pc-windows-msvc'

    # ------------------------------------------------------------- platform
    $onWindows = ($PSVersionTable.PSEdition -ne 'Core') -or ((Get-Variable -Name IsWindows -ValueOnly -ErrorAction SilentlyContinue) -eq $true)
    if (-not $onWindows) {
        throw "this is not Windows: on Linux and macOS use install.sh (curl -fsSL $repoUrl/releases/latest/download/install.sh | sh)"
    }
    $arch = $env:PROCESSOR_ARCHITEW6432
    if (-not $arch) { $arch = $env:PROCESSOR_ARCHITECTURE }
    try {
        $arch = [string][System.Runtime.InteropServices.RuntimeInformation]::OSArchitecture
    } catch {
        # .NET older than 4.7.1: the environment variables above
        Write-Verbose 'OSArchitecture unavailable; using PROCESSOR_ARCHITECTURE'
    }
    switch -Regex ($arch) {
        '^(X64|AMD64)$' { }
        '^Arm64$' {
            Write-Warning 'Windows on Arm: installing the x86_64 build, which runs under emulation (Windows 11).'
        }
        default {
            throw "there is no prebuilt continuity for Windows on $arch; build it from source instead (Rust 1.88+ from https://rustup.rs):`n  $fromSource"
        }
    }
    if ([Environment]::OSVersion.Version.Major -lt 10) {
        Write-Warning 'continuity is built and tested for Windows 10 and later.'
    }

    # ------------------------------------------------------------ arguments
    if ($Version) { $Version = $Version.TrimStart('v') }
    if (-not $BaseUrl) {
        if ($Version) { $BaseUrl = "$repoUrl/releases/download/v$Version" }
        else { $BaseUrl = "$repoUrl/releases/latest/download" }
    }
    $BaseUrl = $BaseUrl.TrimEnd('/')
    if (-not $BinDir) {
        if (-not $env:LOCALAPPDATA) { throw 'LOCALAPPDATA is not set, so there is no default bin folder: name one with -BinDir DIR' }
        $BinDir = Join-Path $env:LOCALAPPDATA 'Programs\continuity\bin'
    }

    # TLS 1.2 for Windows PowerShell 5.1 on an older .NET default.
    try {
        [Net.ServicePointManager]::SecurityProtocol = [Net.ServicePointManager]::SecurityProtocol -bor [Net.SecurityProtocolType]::Tls12
    } catch {
        Write-Verbose 'could not enable TLS 1.2 explicitly'
    }

    # The first line `EXE --version` prints, or $null when it does not run (exit status,
    # not a Windows program). Windows PowerShell turns a native program's stderr into
    # errors, which 'Stop' would make fatal: 'Continue' while it runs.
    function Get-VersionLine([string] $Exe) {
        $ErrorActionPreference = 'Continue'
        try {
            $out = & $Exe --version 2>$null
            if ($LASTEXITCODE -ne 0) { return $null }
            return ($out | Select-Object -First 1)
        } catch {
            return $null
        }
    }

    function Get-Download([string] $Url, [string] $OutFile, [string] $What) {
        try {
            Invoke-WebRequest -Uri $Url -OutFile $OutFile -UseBasicParsing -TimeoutSec 120
        } catch {
            $status = $null
            $response = $null
            if ($_.Exception.PSObject.Properties['Response']) { $response = $_.Exception.Response }
            if ($response) { try { $status = [int]$response.StatusCode } catch { $status = $null } }
            if ($status -eq 404 -and $What -eq 'SHA256SUMS') {
                throw "no release found at $BaseUrl (HTTP 404 for $Url). Is the version right? The releases are listed at $repoUrl/releases; a mirror given with -BaseUrl must hold SHA256SUMS and the archives side by side."
            }
            if ($status -eq 404) {
                throw "the release lists $(Split-Path -Leaf $OutFile) but the download answered HTTP 404 ($Url); it may still be uploading: try again in a few minutes."
            }
            if ($status) {
                throw "downloading $Url failed: the server answered HTTP $status. Try again later, or use a mirror with -BaseUrl URL."
            }
            throw "could not download $Url ($($_.Exception.Message)). Check the network connection (and a proxy), or use a reachable mirror with -BaseUrl URL."
        }
    }

    Write-Host "continuity installer: Windows $arch, from $BaseUrl"
    $tmp = Join-Path ([IO.Path]::GetTempPath()) ('continuity-install-' + [guid]::NewGuid().ToString('N'))
    New-Item -ItemType Directory -Path $tmp | Out-Null
    $staged = $null
    try {
        # ---------------------------------------------------------- SHA256SUMS
        $sumsFile = Join-Path $tmp 'SHA256SUMS'
        Get-Download "$BaseUrl/SHA256SUMS" $sumsFile 'SHA256SUMS'
        $suffix = "-$target.zip"
        $entries = @()
        $allNames = @()
        foreach ($line in Get-Content -LiteralPath $sumsFile) {
            $parts = $line.Trim() -split '\s+', 2
            if ($parts.Count -ne 2) { continue }
            $name = $parts[1].TrimStart('*')
            if (-not $name.StartsWith('continuity-')) { continue }
            $allNames += $name
            if (-not $name.EndsWith($suffix) -or $name.Length -le $suffix.Length) { continue }
            if ($Version -and $name -ne "continuity-$Version$suffix") { continue }
            $entries += , @($parts[0], $name)
        }
        if ($allNames.Count -eq 0) {
            throw "$BaseUrl/SHA256SUMS lists no continuity archive; is that the right address? A mirror given with -BaseUrl must hold SHA256SUMS and the archives side by side."
        }
        if ($entries.Count -eq 0) {
            if ($Version) {
                throw "the release at $BaseUrl has no version $Version for Windows x86_64 ($target); it lists: $($allNames -join ', ')"
            }
            throw "the release at $BaseUrl has no archive for Windows x86_64 ($target); build it from source instead (Rust 1.88+ from https://rustup.rs):`n  $fromSource"
        }
        if ($entries.Count -gt 1) {
            throw "SHA256SUMS at $BaseUrl lists $($entries.Count) archives for $target; name the one to install with -Version V"
        }
        $expected = $entries[0][0].ToLowerInvariant()
        $archive = $entries[0][1]
        if ($expected -notmatch '^[0-9a-f]{64}$') { throw "SHA256SUMS has a malformed digest for ${archive}: $expected" }

        # ----------------------------------------------------- download, verify
        Write-Host "downloading $archive"
        $zip = Join-Path $tmp $archive
        Get-Download "$BaseUrl/$archive" $zip 'archive'
        $actual = (Get-FileHash -Algorithm SHA256 -LiteralPath $zip).Hash.ToLowerInvariant()
        if ($actual -ne $expected) {
            throw "checksum mismatch for ${archive}: SHA256SUMS says $expected, the download is $actual. The download is corrupt or was tampered with; nothing was installed. Try again; if it persists, report it at $repoUrl/issues"
        }
        Write-Host "verified SHA-256 $actual"

        # ------------------------------------------------------------- unpack
        $unpacked = Join-Path $tmp 'unpacked'
        Expand-Archive -LiteralPath $zip -DestinationPath $unpacked -Force
        $folder = $archive.Substring(0, $archive.Length - 4)
        $binary = Join-Path (Join-Path $unpacked $folder) 'continuity.exe'
        if (-not (Test-Path -LiteralPath $binary -PathType Leaf)) {
            throw "$archive holds no $folder\continuity.exe; the release is malformed: report it at $repoUrl/issues"
        }

        # ------------------------------------------------------------ install
        try {
            New-Item -ItemType Directory -Path $BinDir -Force | Out-Null
        } catch {
            throw "cannot create $BinDir ($($_.Exception.Message)); choose a folder you own with -BinDir DIR"
        }
        $BinDir = (Resolve-Path -LiteralPath $BinDir).ProviderPath
        $dest = Join-Path $BinDir 'continuity.exe'
        $previous = $null
        if (Test-Path -LiteralPath $dest) { $previous = Get-VersionLine $dest }

        # A temporary name in the same folder, run once, then renamed into place: a binary
        # that cannot run here replaces nothing.
        $staged = Join-Path $BinDir ".continuity.install.$PID.exe"
        Copy-Item -LiteralPath $binary -Destination $staged -Force
        $installedVersion = Get-VersionLine $staged
        if (-not $installedVersion) {
            throw "the downloaded binary does not run on this machine; nothing was installed. Build it from source instead:`n  $fromSource"
        }
        # A running continuity.exe cannot be overwritten, but it can be renamed: move it
        # aside first (removed now if possible, else at the next install).
        Get-ChildItem -LiteralPath $BinDir -Filter 'continuity.exe.old-*' -ErrorAction SilentlyContinue |
            Remove-Item -Force -ErrorAction SilentlyContinue
        $old = "$dest.old-$PID"
        if (Test-Path -LiteralPath $dest) { [IO.File]::Move($dest, $old) }
        [IO.File]::Move($staged, $dest)
        $staged = $null
        if (Test-Path -LiteralPath $old) { Remove-Item -LiteralPath $old -Force -ErrorAction SilentlyContinue }

        if ($previous -and $previous -ne $installedVersion) { Write-Host "replaced $previous" }
        Write-Host "installed $installedVersion"
        Write-Host "       at $dest"

        # --------------------------------------------------------------- PATH
        $onPath = @($env:Path -split ';' | Where-Object { $_ -and ($_.TrimEnd('\') -ieq $BinDir.TrimEnd('\')) }).Count -gt 0
        if (-not $NoModifyPath) {
            # The registry value itself, unexpanded, so %VARIABLES% in the user's PATH stay.
            $key = [Microsoft.Win32.Registry]::CurrentUser.OpenSubKey('Environment', $true)
            try {
                $userPath = [string]$key.GetValue('Path', '', [Microsoft.Win32.RegistryValueOptions]::DoNotExpandEnvironmentNames)
                $inUserPath = @($userPath -split ';' | Where-Object { $_ -and ($_.TrimEnd('\') -ieq $BinDir.TrimEnd('\')) }).Count -gt 0
                if (-not $inUserPath) {
                    $newPath = if ($userPath) { "$($userPath.TrimEnd(';'));$BinDir" } else { $BinDir }
                    $key.SetValue('Path', $newPath, [Microsoft.Win32.RegistryValueKind]::ExpandString)
                    # Tell running programs (Explorer, new terminals) that the environment changed.
                    [Environment]::SetEnvironmentVariable('CONTINUITY_INSTALL_PATH_REFRESH', '1', 'User')
                    [Environment]::SetEnvironmentVariable('CONTINUITY_INSTALL_PATH_REFRESH', $null, 'User')
                    Write-Host ''
                    Write-Host "added $BinDir to your user PATH: new terminals find 'continuity'."
                }
            } finally {
                $key.Close()
            }
            if (-not $onPath) { $env:Path = "$env:Path;$BinDir"; $onPath = $true }
        } elseif (-not $onPath) {
            Write-Host ''
            Write-Host "$BinDir is not on your PATH. To run plain 'continuity', add it (Settings > Environment Variables), or run:"
            Write-Host "  [Environment]::SetEnvironmentVariable('Path', [Environment]::GetEnvironmentVariable('Path', 'User') + ';$BinDir', 'User')"
        }
        $found = Get-Command continuity -CommandType Application -ErrorAction SilentlyContinue | Select-Object -First 1
        if ($found -and $onPath -and ($found.Path -ine $dest)) {
            Write-Warning "another continuity comes first on PATH: $($found.Path) (remove it, or put $BinDir before it)"
        }

        $cmd = if ($onPath) { 'continuity' } else { "& '$dest'" }
        Write-Host ''
        Write-Host 'Next:'
        Write-Host "  $cmd serve                        # start the server on http://127.0.0.1:8787"
        Write-Host "  $cmd setup --client claude-code   # connect Claude Code (or: setup, for every client found)"
    } finally {
        if ($staged -and (Test-Path -LiteralPath $staged)) { Remove-Item -LiteralPath $staged -Force -ErrorAction SilentlyContinue }
        Remove-Item -LiteralPath $tmp -Recurse -Force -ErrorAction SilentlyContinue
    }
}

try {
    Install-Continuity -Version $Version -BaseUrl $BaseUrl -BinDir $BinDir -NoModifyPath:$NoModifyPath
} catch {
    Write-Host "continuity-install: error: $($_.Exception.Message)" -ForegroundColor Red
    # Run as a file, the caller reads the exit code; run by `irm | iex`, exiting would
    # close the user's window.
    if ($PSCommandPath) { exit 1 }
}
